"""The log viewer: numbered lines with permalinks, :::MLLOG lines highlighted, other lines folded, pages
read line by line, hostile logs shown as text, the embargo of the result, and links from findings and flags."""

from __future__ import annotations

import datetime
import hashlib
import io
import tarfile

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts.models import Membership
from accounts.services import membership_add
from ingest import storage
from ingest.models import Run
from leaderboard import logs
from tests.factories import FindingFactory, OrganizationFactory, ResultFactory, RoundFactory, RunFactory

pytestmark = pytest.mark.django_db

MLLOG = ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "%s", "value": %s}'


def _log(lines: list[str], newline: str = "\n") -> bytes:
    return newline.join(lines).encode() + newline.encode()


def _run_with_log(data: bytes, *, result=None, position: int = 0, line_count: int | None = None) -> Run:
    sha = hashlib.sha256(data).hexdigest()
    storage.put_run_log(data, sha)
    count = line_count if line_count is not None else data.count(b"\n")
    return RunFactory(result=result or ResultFactory(), position=position, sha256=sha, byte_count=len(data),
                      line_count=count, file=f"org/results/sys/resnet/result_{position}.txt")


def _page(client: Client, run: Run, query: str = "") -> str:
    response = client.get(f"/results/{run.result_id}/runs/{run.position}/{query}")
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_each_line_has_a_permalink_anchor_and_its_number(client: Client) -> None:
    run = _run_with_log(_log([MLLOG % ("run_start", "null"), "hello", MLLOG % ("run_stop", '"success"')]))
    html = _page(client, run)
    for number in (1, 2, 3):
        assert f'id="L{number}"' in html and f'href="#L{number}">{number}</a>' in html


def test_mllog_lines_show_their_key_and_value(client: Client) -> None:
    run = _run_with_log(_log([MLLOG % ("eval_accuracy", "0.7612")]))
    html = _page(client, run)
    assert 'class="ln mllog' in html
    assert '<span class="mkey">eval_accuracy</span>' in html and "= 0.7612" in html


def test_runs_of_other_lines_are_folded_with_their_count(client: Client) -> None:
    noise = [f"noise {i}" for i in range(10)]
    run = _run_with_log(_log([MLLOG % ("init_start", "null"), *noise, MLLOG % ("init_stop", "null")]))
    html = _page(client, run)
    assert "10 lines without <code>:::MLLOG</code> (2–11)" in html
    assert '<details class="fold">' in html  # closed: nothing cites those lines


def test_a_target_line_opens_its_fold_and_is_marked(client: Client) -> None:
    run = _run_with_log(_log([MLLOG % ("init_start", "null"), *[f"noise {i}" for i in range(10)]]))
    html = _page(client, run, "?line=7")
    assert '<details class="fold" open>' in html
    assert 'target" id="L7"' in html


def test_short_runs_of_other_lines_are_not_folded(client: Client) -> None:
    run = _run_with_log(_log([MLLOG % ("a", "1"), "x", "y", MLLOG % ("b", "2")]))
    assert "<details class=\"fold\"" not in _page(client, run)


def test_hostile_text_is_escaped_and_bad_bytes_replaced(client: Client) -> None:
    hostile_mllog = MLLOG.encode() % (b"</code><b>x", b'"<img src=x>"')
    data = b"<script>alert(1)</script>\n\x00\x01\xff\xfe binary\n" + hostile_mllog + b"\n"
    run = _run_with_log(data)
    html = _page(client, run)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x>" not in html and "<b>x" not in html
    assert "\x00" not in html and "\x01" not in html
    assert "\ufffd\ufffd\ufffd\ufffd binary" in html  # NUL, SOH and two invalid UTF-8 bytes, each replaced


def test_a_huge_line_is_cut_and_counted_and_numbering_goes_on(client: Client) -> None:
    huge = "A" * (logs.SHOWN_CHARS + 12_345)
    run = _run_with_log(_log(["first", huge, "third"]))
    html = _page(client, run)
    assert "12345 more characters not shown" in html
    assert "A" * (logs.SHOWN_CHARS + 1) not in html
    assert 'id="L3"' in html and "third" in html


def test_lines_are_numbered_as_the_engine_numbers_them(client: Client) -> None:
    # Universal newlines: \r\n and a lone \r end a line, as in ingest.engine.logparse.
    run = _run_with_log(b"one\r\ntwo\rthree\nfour\n", line_count=4)
    html = _page(client, run)
    assert '<code>three</code>' in html.split('id="L3"')[1].split('id="L4"')[0]


def test_large_logs_are_paged(client: Client) -> None:
    total = logs.PAGE_LINES * 2 + 10
    run = _run_with_log(_log([f"line {i}" for i in range(1, total + 1)]))
    first = _page(client, run)
    assert f'id="L{logs.PAGE_LINES}"' in first and f'id="L{logs.PAGE_LINES + 1}"' not in first
    assert "page 1 of 3" in first and 'rel="next"' in first
    third = _page(client, run, "?page=3")
    assert f'id="L{total}"' in third and 'id="L1"' not in third and 'rel="next"' not in third
    # ?line= opens the page that holds the line.
    around = _page(client, run, f"?line={logs.PAGE_LINES + 5}")
    assert f'id="L{logs.PAGE_LINES + 5}"' in around and "page 2 of 3" in around


def test_a_page_past_the_end_is_404_and_junk_parameters_are_ignored(client: Client) -> None:
    run = _run_with_log(_log(["a", "b"]))
    assert client.get(f"/results/{run.result_id}/runs/0/?page=9").status_code == 404
    for junk in ("?page=-1", "?page=abc", "?line=0", "?line=99999999999999", "?page=%01"):
        assert client.get(f"/results/{run.result_id}/runs/0/{junk}").status_code == 200, junk
    # A NUL in the address is refused before any view (core.middleware.RefuseNul).
    assert client.get(f"/results/{run.result_id}/runs/0/?page=%00").status_code == 400


def test_read_page_never_reads_past_its_page() -> None:
    """The page is read line by line: a log of many pages is not read beyond the page asked for."""
    run = _run_with_log(_log([f"l{i}" for i in range(logs.PAGE_LINES * 3)]))
    reads: list[int] = []
    original = logs._Raw.readinto

    def counting(self, buffer):  # type: ignore[no-untyped-def]
        count = original(self, buffer)
        reads.append(count)
        return count

    logs._Raw.readinto = counting  # type: ignore[method-assign]
    try:
        logs.read_page(run, page=1)
    finally:
        logs._Raw.readinto = original  # type: ignore[method-assign]
    assert sum(reads) < run.byte_count / 2


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_skipping_lines_counts_them_as_reading_them_does(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Pages after the first start where reading line by line would: \r\n split across the skip's chunks,
    lone \r, empty lines, a last line without an end."""
    data = b"a\r\nb\rc\n\n\r\r\nd\re\r\n\r\nf\rg"
    expected = [text for text, _ in logs._lines(io.BufferedReader(io.BytesIO(data)))]
    monkeypatch.setattr(logs, "_SKIP_READ", chunk)
    for skip in range(len(expected) + 2):
        rest = [text for text, _ in logs._lines(logs._skip(io.BufferedReader(io.BytesIO(data)), skip))]
        assert rest == expected[skip:], (skip, rest)


def test_raw_download_is_the_bytes_as_stored(client: Client) -> None:
    data = b"\xff\xfe raw <bytes>\n"
    run = _run_with_log(data)
    response = client.get(f"/results/{run.result_id}/runs/0/raw")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "attachment" in response["Content-Disposition"]


def test_a_log_missing_everywhere_is_a_clear_404(client: Client) -> None:
    run = RunFactory(sha256="f" * 64)
    response = client.get(f"/results/{run.result_id}/runs/{run.position}/")
    assert response.status_code == 404
    assert b"not stored in Podium" in response.content


def _bundled_run(data: bytes, *, judged: bytes | None = None, before: bytes | None = None) -> Run:
    """A run of an upload whose log is not in the run-log store, only in its stored bundle (as `data`); the Run
    names the bytes that were judged (`judged`, by default the same). `before`: the bytes of another member
    answering to the same name under another top folder, ahead of it in the archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        members = [("decoy", before)] if before is not None else []
        for top, content in [*members, ("org", data)]:
            info = tarfile.TarInfo(f"{top}/results/sys/resnet/result_0.txt")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    path = storage.scratch_dir() / "bundle.tar.gz"
    path.write_bytes(buffer.getvalue())
    sha = hashlib.sha256(buffer.getvalue()).hexdigest()
    rel = storage.store(path, sha, ".tar.gz")
    result = ResultFactory(submission__bundle_path=rel, submission__sha256=sha, submission__source="upload")
    return RunFactory(result=result, position=0, sha256=hashlib.sha256(data if judged is None else judged).hexdigest(),
                      file="org/results/sys/resnet/result_0.txt")


def test_an_upload_without_a_stored_log_falls_back_to_its_bundle(client: Client) -> None:
    run = _bundled_run(_log([MLLOG % ("run_start", "null"), "from the bundle"]))
    assert "from the bundle" in _page(client, run)


def test_a_bundle_member_that_is_not_the_judged_log_is_never_served(client: Client) -> None:
    """The member named as the run's file holds other bytes than the Run's sha256 names: a clear 404, on the page
    and the raw download, never those bytes shown as the run's log."""
    run = _bundled_run(_log([MLLOG % ("run_start", "null"), "not what was judged"]),
                       judged=_log([MLLOG % ("run_start", "null"), "what was judged"]))
    for suffix in ("", "raw"):
        response = client.get(f"/results/{run.result_id}/runs/0/{suffix}")
        assert response.status_code == 404
        content = response.content if suffix == "" else b"".join(getattr(response, "streaming_content", [b""]))
        assert b"not what was judged" not in content
    assert b"not the log that was judged" in client.get(f"/results/{run.result_id}/runs/0/").content


def test_of_two_bundle_members_answering_to_the_runs_name_the_judged_one_is_served(client: Client) -> None:
    run = _bundled_run(_log([MLLOG % ("run_start", "null"), "what was judged"]),
                       before=_log([MLLOG % ("run_start", "null"), "a decoy"]))
    page = _page(client, run)
    assert "what was judged" in page and "a decoy" not in page


@pytest.fixture
def embargoed_run():
    round_ = RoundFactory(publication_date=timezone.now() + datetime.timedelta(days=30),
                          submission_deadline=timezone.now() + datetime.timedelta(days=3))
    acme = OrganizationFactory(name="Acme Embargo", slug="acme-embargo")
    result = ResultFactory(system__round=round_, system__organization=acme)
    return _run_with_log(_log([MLLOG % ("secret", "1")]), result=result)


def test_an_embargoed_results_log_is_404_for_a_visitor(client: Client, embargoed_run: Run) -> None:
    for suffix in ("", "raw", "?line=1"):
        assert client.get(f"/results/{embargoed_run.result_id}/runs/0/{suffix}").status_code == 404


def test_an_embargoed_results_log_shows_for_its_member(client: Client, embargoed_run: Run) -> None:
    member = get_user_model().objects.create_user("member", password="x-long-password-1")
    membership_add(user=member, organization=embargoed_run.result.organization, role=Membership.Role.SUBMITTER)
    client.force_login(member)
    assert "secret" in _page(client, embargoed_run)


def test_findings_link_to_their_line_and_are_shown_beside_it(client: Client) -> None:
    run = _run_with_log(_log([MLLOG % ("a", "1"), *[f"n{i}" for i in range(8)], MLLOG % ("eval_accuracy", "0.1")]))
    FindingFactory(result=run.result, run=run, file=run.file, line=10, message="quality target not reached")
    result_html = Client().get(f"/results/{run.result_id}/").content.decode()
    assert f'href="/results/{run.result_id}/runs/0/?line=10#L10"' in result_html
    assert f'href="/results/{run.result_id}/runs/0/"' in result_html  # the runs table's file links to the log
    log_html = _page(client, run)
    assert 'cited" id="L10"' in log_html and "quality target not reached" in log_html


def test_line_url_points_at_the_page_and_fragment() -> None:
    assert logs.line_url(3, 1, 135) == "/results/3/runs/1/?line=135#L135"
    assert logs.page_of(logs.PAGE_LINES + 1) == 2 and logs.page_of(1) == 1


def test_a_line_or_page_in_digits_int_refuses_is_ignored(client: Client) -> None:
    """'²' passes str.isdigit() and int() refuses it: ?line=² answered 500; now it is junk, ignored."""
    run = _run_with_log(_log(["a", "b"]))
    for junk in ("?line=²", "?page=²", "?line=١", "?page=①"):
        assert client.get(f"/results/{run.result_id}/runs/0/{junk}").status_code == 200, junk
