"""Two middlewares: `Compress`, text answers gzip-compressed for the clients that ask (its docstring says
why), and `RefuseNul`, refusing before any view runs an address that carries a NUL character.

Why refuse NUL: PostgreSQL text cannot hold a NUL, and a query naming one fails ("text fields cannot contain NUL"):
a filter value (`/rounds/<round>/?framework=%00`, the round table's, the charts' `benchmark`, the search's
`q`) or a slug in the path (`/rounds/a%00b/`, `/api/v1/organizations/a%00b/`) that reached a query answered
500 on PostgreSQL, where SQLite simply matched nothing. No name, slug, key or search of Podium's holds a NUL,
so one here is refused as a bad request (400) with the one error vocabulary, in the shape the address's
answers take: the API's {"detail", "code"}, a chart's or export's {"error"}, else the refusal page. Forms
refuse NUL on their own (Django's form fields); the query string and the path are what no form reads.
"""

from __future__ import annotations

import gzip
import re
import secrets
from collections.abc import Callable, Iterable, Iterator

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.text import StreamingBuffer

from core.errors import BadRequest

MESSAGE = "The address holds a NUL character (%00), which no name, key or filter value can contain."


def _holds_nul(request: HttpRequest) -> bool:
    if "\x00" in request.path:  # already decoded
        return True
    # The parameters as a view reads them (decoded): "%2500" is the text "%00", not a NUL.
    return any("\x00" in name or any("\x00" in value for value in values) for name, values in request.GET.lists())


class RefuseNul:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not _holds_nul(request):
            return self.get_response(request)
        refusal = BadRequest(MESSAGE)
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": refusal.message, "code": refusal.code}, status=refusal.status)
        if request.path.endswith((".json", ".csv")):
            return JsonResponse({"error": refusal.message}, status=refusal.status)
        return render(request, "refusal.html", {"refusal": refusal}, status=refusal.status)


# Answers worth compressing: what Podium writes as text. Not a bundle a runner downloads (application/gzip)
# or any other archive or image: compressed already, they would cost CPU for nothing.
_TEXT_TYPES = frozenset({"application/json", "application/javascript", "application/xml", "application/yaml",
                        "application/vnd.oai.openapi"})  # the API schema, YAML
_ACCEPTS_GZIP = re.compile(r"\bgzip\b")
# zlib's level 3, not Django's 6: 2.7x less CPU for 15% more bytes (an API page of 100 results, 133 KiB:
# 0.51 ms -> 15.1 KiB, against 1.38 ms -> 13.0 KiB; the round's CSV 6.1 against 14.7 ms): a cached page
# costs the server ~1 ms, which level 6 more than doubled.
LEVEL = 3
# Random bytes in each answer's gzip header (as Django's GZipMiddleware adds, "Heal the BREACH"): the
# compressed length of a page no longer tells an attacker how well their guess compressed with a secret.
MAX_RANDOM_BYTES = 100


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml", "+yaml"))


def _padding() -> bytes:
    return b"a" * secrets.randbelow(MAX_RANDOM_BYTES)


def _compressed(data: bytes) -> bytes:
    packed = gzip.compress(data, compresslevel=LEVEL, mtime=0)
    header = bytearray(packed[:10])
    header[3] = gzip.FNAME  # a file name follows the header: the padding
    return bytes(header) + _padding() + b"\x00" + packed[10:]


def _compressed_stream(chunks: Iterable[bytes]) -> Iterator[bytes]:
    buffer = StreamingBuffer()  # read() takes what was written since the last read
    with gzip.GzipFile(filename=_padding(), mode="wb", compresslevel=LEVEL, fileobj=buffer, mtime=0) as packer:
        yield buffer.read()  # the header
        for chunk in chunks:
            packer.write(chunk)
            data = buffer.read()
            if data:
                yield data
    yield buffer.read()


class Compress:
    """Text answers (pages, API JSON, the exports, logs) gzip-compressed for the clients that ask
    (Accept-Encoding: gzip), as Django's GZipMiddleware does, but for text types only and at a cheaper level.

    Why in the application: its pages and lists are tens to hundreds of KiB of repetitive HTML and JSON
    that shrink 7-9x (a round table page 135 -> 19 KiB, an API page of 100 results 133 -> 15 KiB; the
    round's CSV 4x), and the stack runs gunicorn behind whatever proxy the operator has, which often
    passes answers through as they come (a cloud load balancer does). Streamed answers (the exports, raw
    logs) are compressed as they stream. An answer shorter than 200 bytes, or not shorter compressed, is
    sent as it is. A strong ETag becomes weak when compressed (RFC 9110); the API's conditional GET
    compares weakly, as the RFC asks for If-None-Match. The CSRF token in a page is masked anew per answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if (not _is_text(response.get("Content-Type", "")) or response.has_header("Content-Encoding")
                or (not response.streaming and len(response.content) < 200)):  # type: ignore[attr-defined]
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        if not _ACCEPTS_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", "")) or getattr(
                response, "is_async", False):
            return response
        if response.streaming:
            response.streaming_content = _compressed_stream(response.streaming_content)  # type: ignore[attr-defined]
            del response.headers["Content-Length"]
        else:
            packed = _compressed(response.content)  # type: ignore[attr-defined]
            if len(packed) >= len(response.content):  # type: ignore[attr-defined]
                return response
            response.content = packed  # type: ignore[attr-defined]
            response.headers["Content-Length"] = str(len(packed))
        etag = response.get("ETag")
        if etag and etag.startswith('"'):
            response.headers["ETag"] = "W/" + etag
        response.headers["Content-Encoding"] = "gzip"
        return response
