"""Text answers are gzip-compressed for the clients that ask (core.middleware.Compress): pages, API JSON
and the streamed exports decompress to exactly what an uncompressed answer holds, conditional GET still
answers 304, each answer carries random padding, and binary answers, short ones and clients that do not
ask are left alone."""

from __future__ import annotations

import gzip
import json
import random

import pytest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.test import Client, RequestFactory

from catalog.models import Round
from core.middleware import Compress
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory

GZIP = {"HTTP_ACCEPT_ENCODING": "gzip, deflate, br"}


@pytest.fixture
def round_() -> Round:
    round_ = RoundFactory()
    benchmark = BenchmarkFactory(round=round_, key="resnet")
    for n in range(8):
        ResultFactory(system=SystemFactory(round=round_, slug=f"system-{n}", name=f"System number {n}"),
                      benchmark=benchmark, score=10.0 + n)
    return round_


def _body(response: HttpResponse | StreamingHttpResponse) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _plain_and_compressed(path: str) -> tuple[bytes, bytes, HttpResponse]:
    client = Client()
    plain = client.get(path)
    compressed = client.get(path, **GZIP)
    assert plain.status_code == compressed.status_code == 200
    assert "Content-Encoding" not in plain
    assert compressed["Content-Encoding"] == "gzip" and "Accept-Encoding" in compressed["Vary"]
    return _body(plain), gzip.decompress(_body(compressed)), compressed


@pytest.mark.django_db
def test_an_api_list_decompresses_to_the_same_json_and_its_weak_etag_still_answers_304(round_: Round) -> None:
    path = "/api/v1/results/?benchmark=resnet&ordering=score"
    plain, unpacked, compressed = _plain_and_compressed(path)
    assert json.loads(unpacked) == json.loads(plain) and json.loads(plain)["count"] == 8
    strong = Client().get(path)["ETag"]
    assert compressed["ETag"] == f"W/{strong}"
    again = Client().get(path, HTTP_IF_NONE_MATCH=compressed["ETag"], **GZIP)
    assert again.status_code == 304 and again.content == b""


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_streamed_export_decompresses_to_the_same_bytes(round_: Round, fmt: str) -> None:
    plain, unpacked, _ = _plain_and_compressed(f"/rounds/{round_.slug}/export.{fmt}")
    assert unpacked == plain and b"system-7" in plain


@pytest.mark.django_db
def test_a_page_decompresses_to_the_same_html(round_: Round) -> None:
    plain, unpacked, compressed = _plain_and_compressed(f"/rounds/{round_.slug}/")
    assert unpacked == plain and b"System number 7" in plain
    assert len(_body(compressed)) < len(plain) / 3


@pytest.mark.django_db
def test_a_client_that_does_not_ask_gets_the_answer_as_it_is(round_: Round) -> None:
    response = Client().get(f"/rounds/{round_.slug}/", HTTP_ACCEPT_ENCODING="identity")
    assert "Content-Encoding" not in response and b"System number 7" in response.content


def _through_middleware(response: HttpResponse) -> HttpResponse:
    request: HttpRequest = RequestFactory().get("/", **GZIP)
    return Compress(lambda _: response)(request)  # type: ignore[return-value]


@pytest.mark.parametrize("content_type", ["application/gzip", "application/zip", "image/png",
                                          "application/octet-stream"])
def test_binary_answers_are_not_compressed_again(content_type: str) -> None:
    body = bytes(range(256)) * 40
    answered = _through_middleware(HttpResponse(body, content_type=content_type))
    assert "Content-Encoding" not in answered and answered.content == body


@pytest.mark.parametrize("content_type", ["text/plain", "text/csv; charset=utf-8", "application/json",
                                          "application/problem+json", "application/vnd.oai.openapi"])
def test_text_answers_are_compressed(content_type: str) -> None:
    body = b"Podium " * 500
    answered = _through_middleware(HttpResponse(body, content_type=content_type))
    assert answered["Content-Encoding"] == "gzip" and gzip.decompress(answered.content) == body


def test_each_compressed_answer_carries_random_padding() -> None:
    """The same answer compressed again differs in length (random bytes in the gzip header), so an
    attacker cannot read how well a guess compressed with a secret from the length (BREACH)."""
    body = b"Podium " * 500
    lengths = {len(_through_middleware(HttpResponse(body, content_type="text/html")).content) for _ in range(12)}
    assert len(lengths) > 1


def test_a_short_answer_or_an_incompressible_one_is_sent_as_it_is() -> None:
    short = _through_middleware(HttpResponse(b"ok", content_type="text/plain"))
    assert "Content-Encoding" not in short and short.content == b"ok"
    noise = random.Random(7).randbytes(4000)
    answered = _through_middleware(HttpResponse(noise, content_type="text/plain"))
    assert "Content-Encoding" not in answered and answered.content == noise
