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

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.middleware.gzip import GZipMiddleware
from django.shortcuts import render

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


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml", "+yaml"))


class Compress(GZipMiddleware):
    """Django's GZipMiddleware, for text answers only: pages, API JSON, the exports, logs.

    Why in the application: its pages and lists are tens to hundreds of KiB of repetitive HTML and JSON
    that shrink 8-17x (a round table page 135 -> 17 KiB, an API page of 100 results 133 -> 13 KiB; the
    round's CSV 4x), and the stack runs gunicorn behind whatever proxy the operator has, which often
    passes answers through as they come (a cloud load balancer does). Only for a client that asks
    (Accept-Encoding: gzip); streamed answers (the exports, raw logs) are compressed as they stream.
    BREACH: Django pads each compressed answer with random bytes (max_random_bytes), and the CSRF token
    in a page is masked anew per answer. A strong ETag becomes weak when compressed (RFC 9110); the API's
    conditional GET compares weakly, as the RFC asks for If-None-Match."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not _is_text(response.get("Content-Type", "")):
            return response
        return super().process_response(request, response)
