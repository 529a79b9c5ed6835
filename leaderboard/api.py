"""The public read API under /api/v1/: rounds, benchmarks, organizations, systems, results, runs, findings.

Every queryset starts from a selector of ingest.visibility (visible_results, visible_systems,
visible_runs, visible_findings, visible_rounds), so an anonymous caller sees published results that
no review holds back, and a member also what the rule grants their organization. Filters only narrow.

Responses carry an ETag built from the results generation (core.cache, bumped by every service that
changes what a visitor may see), the set of published rounds, what the rule grants the caller and the
full query string; a matching If-None-Match answers 304 before any listing query runs. See docs/api.md.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.core.cache import cache as django_cache
from django.core.paginator import InvalidPage
from django.core.paginator import Paginator as DjangoPaginator
from django.db import connections
from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, F, Max, OuterRef, Q, QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.functional import cached_property
from django.utils.http import http_date, parse_etags, quote_etag
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import ISO_8601, serializers, status, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils.urls import remove_query_param, replace_query_param

if TYPE_CHECKING:
    from rest_framework.pagination import HtmlContextWithPageLinks  # in the type stubs only

from accounts.authentication import TokenScopeAllows
from accounts.models import Organization
from catalog.models import Benchmark, Round
from core import compiled
from core.release import release
from ingest.models import Finding, Result, ResultQuerySet, Run, System
from ingest.visibility import (
    viewer_fingerprint,
    visible_findings,
    visible_results,
    visible_results_of_rounds,
    visible_rounds,
    visible_runs,
    visible_systems,
)
from leaderboard import api_sql, cache, kept_rows, keyset, page_plans
from leaderboard import filters as api_filters
from leaderboard.addresses import around_id

AnyResponse = TypeVar("AnyResponse", bound=HttpResponse)

DERIVED = "Derived — not an official score. "
# Query parameters that change which rows a page shows but not how many rows the list has.
NOT_FILTERS = frozenset({"page", "page_size", "ordering", "format", "cursor"})
# Anonymous answers' bodies kept per results generation (each URL is one; a page of 100 results is ~130 KB):
# past that many, an answer is made for each request and not kept (leaderboard.cache.room_for_variant).
API_BODY_VARIANTS = 500


# --- schema: the token scheme ------------------------------------------------------------------------

# --- helpers ------------------------------------------------------------------------------------------

def _absolute(request: Request | None, path: str) -> str:
    return request.build_absolute_uri(path) if request is not None else path


def _visible_since(created_at: datetime.datetime, publication_date: datetime.datetime | None) -> datetime.datetime:
    """When a row became what a caller can see: stored, or later made public by its round's publication."""
    if publication_date is not None and created_at < publication_date <= timezone.now():
        return publication_date
    return created_at


def _last_modified(response: AnyResponse, latest: datetime.datetime | None) -> AnyResponse:
    if latest is not None:
        response["Last-Modified"] = http_date(latest.timestamp())
    return response


def _desc(moment: datetime.datetime | None) -> float:
    """A sort key putting later moments first (None: anywhere, the caller sorts it apart)."""
    return -moment.timestamp() if moment is not None else 0.0


def _filters_digest(request: Request) -> str:
    """The query string's filters (not the page, its size, the ordering or the format), in a fixed order."""
    params = sorted((name, value) for name, values in request.query_params.lists()
                    for value in values if name not in NOT_FILTERS)
    return hashlib.sha256(repr(params).encode()).hexdigest()[:32]


class Pages(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 500


class CountedOnce(DjangoPaginator):
    """A paginator whose row count is kept in the cache round by round (leaderboard.cache.kept_by_round):
    each round's part under `count_key` (what the caller may see, the filters) and its round's freshness
    (the data, the published rounds), so a `COUNT(*)` over a large filtered set runs once per change of
    the data, not per page, and after a change confined to one round (an upload verified there) only that
    round's rows are counted again."""

    def __init__(self, object_list: Any, per_page: int, *, count_key: str, counted: QuerySet[Any] | None = None,
                 round_field: str = "round_id", of_rounds: OfRounds | None = None, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self.count_key = count_key
        # What to count, where the page reads more than its rows (values() over joined columns: their joins
        # would be counted through too).
        self.counted = counted if counted is not None else object_list
        self.round_field = round_field  # the round of a row (a run's is its result's)
        self.of_rounds = of_rounds

    @cached_property
    def count(self) -> int:
        kept, newer = counts_by_round(cast(QuerySet[Any], self.counted), self.count_key, self.round_field,
                                      self.of_rounds)
        return sum(kept.values()) + (newer.count() if newer is not None else 0)


# The rows of `queryset` in the given rounds, for counting them: the same rows as filtering `queryset` by
# those rounds, from a query that may read them more cheaply (see ResultApi.counted_of_rounds).
OfRounds = Callable[[list[int]], QuerySet[Any]]


def counts_by_round(queryset: QuerySet[Any], count_key: str, round_field: str = "round_id",
                    of_rounds: OfRounds | None = None) -> tuple[dict[int, int], QuerySet[Any] | None]:
    """How many rows of `queryset` each round has (`round_field` names a row's round), each round's count kept
    in the cache under `count_key` and its round's freshness (leaderboard.cache.kept_by_round); and the rows of
    rounds this process does not know yet (created since it read the list of rounds, so with a higher id),
    for the caller to count, or None: asked whenever something was counted (an index says at once).
    `of_rounds(ids)`: the same rows as `queryset` in those rounds, read another way (OfRounds)."""
    source = queryset.order_by()
    counted = False

    def compute(stale: list[int]) -> dict[int, int]:
        # The stale rounds in one grouped query, named: PostgreSQL reads "all but the kept ones" by scanning
        # every row. COUNT(*), not of the id: PostgreSQL then may count from an index that holds what the
        # filters read but not the id (the unfiltered results list: 36 -> 7 ms for a 20,000-result round).
        nonlocal counted
        counted = True
        rows_of = (of_rounds(stale).order_by() if of_rounds is not None
                   else source.filter(**{f"{round_field}__in": stale}))
        rows = dict(rows_of.values_list(round_field).annotate(n=Count("*")))
        return {pk: rows.get(pk, 0) for pk in stale}

    kept = cache.kept_by_round("api-count", (count_key,), compute)
    newer = source.filter(**{f"{round_field}__gt": max(kept, default=0)}) if counted or not kept else None
    return kept, newer


# How deep a list is read by page number: past this many rows a `next` link names a cursor (leaderboard.keyset),
# whose page the database finds without reading the rows before it.
KEYSET_FROM = 1000


class CountCachedPages(Pages):
    """Pages whose count is cached per results generation, caller's visibility and query (docs/api.md), and
    whose `next` link past the first KEYSET_FROM rows is a cursor (`?cursor=`, leaderboard.keyset)."""

    cursor_query_param = "cursor"
    keys: list[keyset.Key] | None = None  # the list's ordering, where a cursor can follow it
    by_cursor = False
    more = False  # by cursor: whether rows follow the page
    last_pk: Any = None  # the id of the page's last row
    last_values: tuple[Any, ...] | None = None  # by cursor: the last row's values in the ordering, as read
    page_ids: list[Any] | None = None  # by cursor: the page's ids in the list's order, as read
    source: QuerySet[Any] | None = None

    def _count_once(self, view: Any) -> None:
        key = view.count_key() if view is not None and hasattr(view, "count_key") else None
        if key is not None:
            self.django_paginator_class = cast(type[DjangoPaginator], functools.partial(
                CountedOnce, count_key=key, counted=getattr(view, "counted", None),
                round_field=getattr(view, "count_round_field", "round_id"),
                of_rounds=getattr(view, "counted_of_rounds", None)))

    def _open(self, queryset: QuerySet[Any], request: Request, view: Any) -> None:
        """The page the request asks for (self.page), by its number or, with `?cursor=`, after the row the
        cursor names; its object_list unread."""
        self._count_once(view)
        self.request = request
        self.source = queryset
        self.keys = keyset.ordering_of(queryset)
        paginator = self.django_paginator_class(queryset, self.get_page_size(request) or self.page_size)
        token = request.query_params.get(self.cursor_query_param)
        self.by_cursor = token is not None
        if token is None:
            number: Any = self.get_page_number(request, paginator)
        else:
            if self.keys is None:  # this list's ordering makes no cursor: this one was written by hand
                raise NotFound("Invalid cursor.")
            try:
                cursor = keyset.decode(token, self.keys, queryset.model)
            except keyset.InvalidCursor as exc:
                raise NotFound(str(exc)) from exc
            # Rows removed since the cursor was made leave fewer pages: its page is then the last.
            number = max(1, min(cursor.page, paginator.num_pages))
        try:
            self.page = paginator.page(number)
        except InvalidPage as exc:
            raise NotFound(self.invalid_page_message.format(page_number=number, message=str(exc))) from exc
        self.page_ids = None
        if token is not None and self.keys is not None:
            self.page_ids, self.more, self.last_values = self._after(
                queryset, self.keys, keyset.parts(self.keys, cursor.values), paginator.per_page)
            self.page.object_list = queryset.filter(pk__in=self.page_ids)[:paginator.per_page]

    @staticmethod
    def _after(queryset: QuerySet[Any], keys: list[keyset.Key], parts: list[Q],
               size: int) -> tuple[list[Any], bool, tuple[Any, ...] | None]:
        """The ids of the `size` rows of `queryset` after a cursor (keyset.parts: read part after part, each
        from its place in the ordering's index, until one row more than the page is found), in the list's
        order; whether any row follows them (decided by the rows, not by the count: rows removed or added
        since the walk began must not end it early or send it back); and the last row's values in `keys`."""
        found: list[tuple[Any, ...]] = []
        for part in parts:
            found += queryset.filter(part).values_list(*(key.name for key in keys))[:size + 1 - len(found)]
            if len(found) > size:
                break
        page = found[:size]
        # The last key is the id. A row whose values changed between two parts' reads can be read twice: the
        # page holds it once (one row fewer), and the next page starts after the last row read, losing none.
        ids = list(dict.fromkeys(row[-1] for row in page))
        return ids, len(found) > size, page[-1] if page else None

    def paginate_queryset(self, queryset: QuerySet[Any], request: Request, view: Any = None) -> list[Any] | None:
        self._open(queryset, request, view)
        assert self.page is not None
        rows = list(self.page)
        if rows:
            last = rows[-1]
            self.last_pk = last.get("id", last.get("pk")) if isinstance(last, dict) else last.pk
        if self.page.paginator.num_pages > 1 and self.template is not None:
            self.display_page_controls = True  # as PageNumberPagination does (the browsable API)
        return rows

    def page_slice(self, queryset: QuerySet[Any], request: Request, view: Any = None) -> QuerySet[Any]:
        """What paginate_queryset checks and keeps (the page number, self.page), but the page's slice of
        `queryset` unread, for a caller that reads it its own way (api_sql; it sets last_pk)."""
        self._open(queryset, request, view)
        assert self.page is not None
        return cast(QuerySet[Any], self.page.object_list)

    def get_next_link(self) -> str | None:
        assert self.page is not None and self.request is not None
        if not (self.more if self.by_cursor else self.page.has_next()):
            return None
        deep = self.page.number * self.page.paginator.per_page >= KEYSET_FROM
        if self.keys is not None and (self.by_cursor or deep):
            # By cursor, the values the page was read with (a cursor needs no row to exist any more: its
            # rows may be withdrawn meanwhile); past KEYSET_FROM by number, the page's last row's.
            values = self.last_values if self.by_cursor else self._values_of_last()
            if values is not None:
                token = keyset.encode(self.keys, values, self.page.number + 1)
                url = remove_query_param(self.request.build_absolute_uri(), self.page_query_param)
                return replace_query_param(url, self.cursor_query_param, token)
        if self.by_cursor:  # the last row just went (withdrawn): a page number would repeat rows; start over
            return None
        link = super().get_next_link()
        return remove_query_param(link, self.cursor_query_param) if link else link

    def _values_of_last(self) -> tuple[Any, ...] | None:
        """The page's last row's values in the ordering's keys (read again: the page read only its ids)."""
        if self.keys is None or self.source is None or self.last_pk is None:
            return None
        return self.source.filter(pk=self.last_pk).values_list(*(key.name for key in self.keys)).first()

    def get_previous_link(self) -> str | None:
        link = super().get_previous_link()
        return remove_query_param(link, self.cursor_query_param) if link else link

    def get_html_context(self) -> HtmlContextWithPageLinks:
        """The browsable API's numbered links: by number, without the cursor (which would win over them)."""
        context = super().get_html_context()
        context["page_links"] = [link._replace(url=remove_query_param(link.url, self.cursor_query_param))
                                 if link.url else link for link in context["page_links"]]
        return context

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [*super().get_schema_operation_parameters(view), {
            "name": self.cursor_query_param, "required": False, "in": "query",
            "description": "A position in the list, from a `next` link (past the first 1,000 rows `next` "
                           "links carry one): the page after it, found without reading the rows before it",
            "schema": {"type": "string"}}]

    def head(self) -> str:
        """get_paginated_response's body as JSONRenderer writes it, up to its rows (`envelope`)."""
        assert self.page is not None  # set by page_slice
        head = json.dumps({"count": self.page.paginator.count, "next": self.get_next_link(),
                           "previous": self.get_previous_link()}, ensure_ascii=False, separators=(",", ":"))
        return f'{head[:-1]},"results":'


def envelope(head: str, results_json: str) -> bytes:
    """The body of a page whose rows are written as JSON already, after its `head` (CountCachedPages.head)."""
    return f"{head}{results_json}}}".encode()


class ReadApi(viewsets.ReadOnlyModelViewSet):
    """List and detail, open to anonymous callers, throttled by the project's anon/user rates."""

    permission_classes = [AllowAny, TokenScopeAllows]
    pagination_class = Pages
    filter_backends = [DjangoFilterBackend]

    def get_queryset(self) -> QuerySet[Any]:
        """Start from a selector of ingest.visibility: the hold and the embargo come with it."""
        raise NotImplementedError

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        # Filters narrow lists; a detail URL names its object, whatever the query string says (a
        # superseded result must open by its id without ?all_versions=1).
        if self.action != "list":
            return queryset
        return super().filter_queryset(queryset)

    def last_modified(self, obj: Any) -> datetime.datetime | None:
        return None

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The filtered list's queryset as the page reads it (ResultApi: only the columns it shows)."""
        return queryset

    def list_rows(self, page: list[Any]) -> Any:
        """A page's rows as the response writes them."""
        return self.get_serializer(page, many=True).data

    # --- conditional GET ---

    @cached_property
    def freshness(self) -> str:
        """The data's version (leaderboard.cache.freshness), read once per request: the ETag and the
        cached count are both keyed on it."""
        return cache.freshness()

    @cached_property
    def now(self) -> datetime.datetime:
        """The request's instant: the embargo is decided at it, once (the grant is kept for it). Taken after
        the freshness is read, which counts the publications passed: a page built at this instant and kept
        under that freshness (leaderboard.page_plans) then counts at least those publications as passed. Taken
        before it, a publication passing in between left a plan that hid its round under the later freshness."""
        self.freshness  # noqa: B018 - read first, for the order above
        return timezone.now()

    @cached_property
    def sees(self) -> str:
        """What the rule grants the caller beyond the public record, read once per request."""
        user = self.request.user
        return viewer_fingerprint(user, now=self.now) if user.is_authenticated else "anonymous"

    def etag(self) -> str:
        request = self.request
        user = request.user
        who = f"user:{user.pk}:{self.sees}" if user.is_authenticated else "anonymous"
        # The release too: an answer's shape may change with the code, and its body is kept under this tag.
        parts = ("api-v1", release(), self.freshness, who, request.accepted_renderer.format, request.get_full_path())
        return quote_etag(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32])

    def _matches(self, etag: str) -> bool:
        header = self.request.headers.get("If-None-Match", "")
        # Weak comparison, as RFC 9110 asks for If-None-Match: a proxy may have weakened the tag.
        return any(tag.removeprefix("W/") == etag for tag in parse_etags(header))

    def _cache_headers(self, response: AnyResponse, etag: str) -> AnyResponse:
        response["ETag"] = etag
        response["Cache-Control"] = "private, no-cache" if self.request.user.is_authenticated else "no-cache"
        patch_vary_headers(response, ("Accept", "Authorization", "Cookie"))
        return response

    def _answer(self, data: Any, etag: str, objects: Iterable[Any], paginated: bool) -> Response:
        response = self.get_paginated_response(data) if paginated else Response(data)
        return self._cache_headers(self._stamped(response, objects), etag)

    def _stamped(self, response: AnyResponse, objects: Iterable[Any]) -> AnyResponse:
        """Last-Modified: the latest time one of `objects` became what the caller sees."""
        stamps = [stamp for stamp in map(self.last_modified, objects) if stamp is not None]
        return _last_modified(response, max(stamps) if stamps else None)

    def _shared(self, etag: str, produce: Callable[[], HttpResponse]) -> HttpResponse:
        """Anonymous answers depend only on published data and the URL, which the ETag captures:
        keep the serialized body under it, so a busy list is serialized once per generation."""
        if self.request.user.is_authenticated or self.request.accepted_renderer.format != "json":
            return produce()
        key = f"podium:api-body:{etag}"
        stored = django_cache.get(key)
        if stored is None:
            response = produce()
            # Counted as it is stored (an error is raised before this, and kept nowhere).
            if not cache.room_for_variant("api-body", API_BODY_VARIANTS):
                return response
            if isinstance(response, Response):
                body = self.request.accepted_renderer.render(response.data, "application/json",
                                                             {"request": self.request, "response": response})
            else:  # written as JSON already (api_sql)
                body = response.content
            stored = (body, response.get("Last-Modified"))
            django_cache.set(key, stored, 3600)
        # Already rendered: hand the bytes out as they are (DRF would render the data again).
        answer = HttpResponse(stored[0], content_type="application/json")
        if stored[1]:
            answer["Last-Modified"] = stored[1]
        return self._cache_headers(answer, etag)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        etag = self.etag()
        if self._matches(etag):
            return self._cache_headers(Response(status=status.HTTP_304_NOT_MODIFIED), etag)
        # DRF's stubs type list() as a Response; a plain HttpResponse (already rendered) is finalized alike.
        return cast(Response, self._shared(etag, lambda: self.list_page(etag)))

    def list_page(self, etag: str) -> HttpResponse:
        page = self.paginate_queryset(self.narrow(self.filter_queryset(self.get_queryset())))
        assert page is not None  # pagination_class is always set
        return self._answer(self.list_rows(page), etag, page, paginated=True)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        etag = self.etag()
        if self._matches(etag):
            # The tag is computed without reading the object, so a 304 tells nothing about whether a
            # hidden object exists; any change of the data or of what the caller may see changes it.
            return self._cache_headers(Response(status=status.HTTP_304_NOT_MODIFIED), etag)

        def produce() -> Response:
            instance = self.get_object()
            return self._answer(self.get_serializer(instance).data, etag, [instance], paginated=False)

        return cast(Response, self._shared(etag, produce))


# --- rounds and benchmarks ----------------------------------------------------------------------------

class RoundOutput(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:round-detail", lookup_field="slug")
    web_url = serializers.SerializerMethodField()
    benchmarks = serializers.SlugRelatedField(many=True, read_only=True, slug_field="key",
                                              help_text="Keys of the round's benchmarks, in table order")
    benchmarks_url = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()

    class Meta:
        model = Round
        fields = ["slug", "name", "usage", "ruleset", "submission_deadline", "review_start", "review_end",
                  "publication_date", "closes_at", "is_demo", "benchmarks", "url", "web_url", "benchmarks_url",
                  "results_url"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_web_url(self, obj: Round) -> str:
        return _absolute(self.context.get("request"), reverse("leaderboard:round", args=[obj.slug]))

    @extend_schema_field(OpenApiTypes.URI)
    def get_benchmarks_url(self, obj: Round) -> str:
        return _absolute(self.context.get("request"), f"{reverse('api:benchmark-list')}?round={obj.slug}")

    @extend_schema_field(OpenApiTypes.URI)
    def get_results_url(self, obj: Round) -> str:
        return _absolute(self.context.get("request"), f"{reverse('api:result-list')}?round={obj.slug}")


class RoundApi(ReadApi):
    """Rounds: published ones for everyone; a member also sees the rounds their organization entered."""

    serializer_class = RoundOutput
    filterset_class = api_filters.RoundFilter
    lookup_field = "slug"
    lookup_value_regex = r"[a-z0-9][a-z0-9.-]*"

    def get_queryset(self) -> QuerySet[Round]:
        return (visible_rounds(self.request.user).prefetch_related("benchmarks")
                .order_by(F("publication_date").desc(nulls_last=True), "-ruleset", "slug"))

    def last_modified(self, obj: Round) -> datetime.datetime | None:
        return _visible_since(obj.created_at, obj.publication_date)


class BenchmarkOutput(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:benchmark-detail")
    round = serializers.CharField(source="round.slug", read_only=True, help_text="Round slug")
    results_url = serializers.SerializerMethodField()

    class Meta:
        model = Benchmark
        fields = ["id", "url", "round", "key", "name", "area", "task", "model", "dataset", "quality_metric",
                  "quality_target", "target_direction", "target_text", "required_runs", "olympic_k",
                  "modifiable_hyperparameters", "position", "results_url"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_results_url(self, obj: Benchmark) -> str:
        path = f"{reverse('api:result-list')}?round={obj.round.slug}&benchmark={obj.key}"
        return _absolute(self.context.get("request"), path)


class BenchmarkApi(ReadApi):
    """Benchmarks as each round defines them; `?round=<slug>` for one round's."""

    serializer_class = BenchmarkOutput
    filterset_class = api_filters.BenchmarkFilter

    def get_queryset(self) -> QuerySet[Benchmark]:
        rounds = visible_rounds(self.request.user).values("pk")
        return (Benchmark.objects.filter(round__in=rounds).select_related("round")
                .order_by(F("round__publication_date").desc(nulls_last=True), "round__slug", "position", "key"))

    def last_modified(self, obj: Benchmark) -> datetime.datetime | None:
        return _visible_since(obj.round.created_at, obj.round.publication_date)


def _facet(choices: list[tuple[str, str]]) -> serializers.ChoiceField:
    # Blank when the system description was invalid: the schema must allow "" besides the choices
    # (a read-only ModelSerializer field drops allow_blank).
    return serializers.ChoiceField(choices=choices, allow_blank=True, read_only=True)



# --- organizations and systems ------------------------------------------------------------------------

class RoundCount(serializers.Serializer):
    round = serializers.CharField(help_text="Round slug")
    results = serializers.IntegerField(help_text="Current results in that round that you may see")


class OrganizationOutput(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:organization-detail", lookup_field="slug")
    result_count = serializers.IntegerField(read_only=True, help_text="Current results you may see")
    rounds = RoundCount(many=True, read_only=True, source="visible_rounds",
                        help_text="Rounds with results you may see, newest first")
    results_url = serializers.SerializerMethodField()
    systems_url = serializers.SerializerMethodField()

    class Meta:
        model = Organization
        fields = ["slug", "name", "url", "result_count", "rounds", "results_url", "systems_url"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_results_url(self, obj: Organization) -> str:
        return _absolute(self.context.get("request"), f"{reverse('api:result-list')}?submitter={obj.slug}")

    @extend_schema_field(OpenApiTypes.URI)
    def get_systems_url(self, obj: Organization) -> str:
        return _absolute(self.context.get("request"), f"{reverse('api:system-list')}?organization={obj.slug}")


class OrganizationApi(ReadApi):
    """Organizations with at least one result you may see, and what of theirs you may see per round."""

    serializer_class = OrganizationOutput
    filterset_class = api_filters.OrganizationFilter
    lookup_field = "slug"

    @cached_property
    def rounds(self) -> dict[int, Round]:
        """Every round's dates, read once per request: the embargo is decided from them round by round."""
        return {r.pk: r for r in Round.objects.only("slug", "publication_date").order_by()}

    def visible_results(self, round_ids: Iterable[int] | None = None) -> ResultQuerySet:
        """The caller's visible results (of these rounds), the rule decided per round beforehand: no query
        joins the rounds."""
        rounds = self.rounds.values() if round_ids is None else [self.rounds[pk] for pk in round_ids
                                                                   if pk in self.rounds]
        return visible_results_of_rounds(self.request.user, rounds)

    def get_queryset(self) -> QuerySet[Organization]:
        # One probe of an organization's results per organization, stopped at its first visible one, not a
        # semi-join over every visible result: 15 -> 0.8 ms for 60 organizations and 200,000 results.
        if getattr(self, "swagger_fake_view", False):  # the schema's generation: no request, no database read
            return Organization.objects.none()
        mine = self.visible_results().filter(organization_id=OuterRef("pk"))
        return Organization.objects.filter(Exists(mine)).order_by("name")

    def attach_rounds(self, organizations: Sequence[Organization], *, whole_list: bool = False) -> None:
        """Each organization's visible current results per round. For a page of the list (`whole_list`),
        from every organization's counts kept round by round (leaderboard.cache.kept_by_round: an upload
        verified in one round counts that round again, not every result); for one organization, read."""
        groups = ("round_id", "organization_id")
        if whole_list:
            def compute(stale: list[int]) -> dict[int, list[tuple[int, int, int, datetime.datetime]]]:
                kept: dict[int, list[tuple[int, int, int, datetime.datetime]]] = {pk: [] for pk in stale}
                # Read from one index alone (result_table_choices carries created_at): COUNT(*), not of a column.
                counted = self.visible_results(stale).current().order_by().values_list(*groups)
                for row in counted.annotate(n=Count("*"), newest=Max("created_at")):
                    kept[row[0]].append(row)
                return kept

            rows = [row for kept in cache.kept_by_round("api-organization-rounds", (self.sees,), compute).values()
                    for row in kept]
        else:
            rows = list(self.visible_results().current().order_by().filter(
                organization__in=[o.pk for o in organizations]).values_list(*groups)
                .annotate(n=Count("*"), newest=Max("created_at")))
        rounds = self.rounds
        per_org: dict[int, list[tuple[Round, int, datetime.datetime]]] = defaultdict(list)
        for round_id, organization_id, n, newest in rows:
            if round_id in rounds:
                per_org[organization_id].append((rounds[round_id], n, newest))
        for organization in organizations:
            mine = sorted(per_org.get(organization.pk, []), key=lambda r: (r[0].publication_date is None,
                                                                           _desc(r[0].publication_date), r[0].slug))
            organization.visible_rounds = [{"round": r.slug, "results": n} for r, n, _ in mine]
            organization.result_count = sum(n for _, n, _ in mine)
            stamps = [_visible_since(newest, r.publication_date) for r, _, newest in mine]
            organization.newest = max(stamps, default=organization.created_at)

    def paginate_queryset(self, queryset: QuerySet[Organization]) -> list[Organization] | None:
        page = super().paginate_queryset(queryset)
        if page is not None:
            self.attach_rounds(page, whole_list=True)
        return page

    def get_object(self) -> Organization:
        organization = super().get_object()
        self.attach_rounds([organization])
        return organization

    def last_modified(self, obj: Organization) -> datetime.datetime | None:
        return obj.newest


class SystemOutput(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:system-detail")
    web_url = serializers.SerializerMethodField()
    round = serializers.CharField(source="round.slug", read_only=True, help_text="Round slug")
    organization = serializers.CharField(source="organization.slug", read_only=True, help_text="Organization slug")
    submitter = serializers.CharField(source="organization.name", read_only=True, help_text="Organization name")
    description = serializers.JSONField(read_only=True, help_text="The system description JSON exactly as "
                                                                  "submitted (systems/<slug>.json)")
    division = _facet(System.Division.choices)
    category = _facet(System.Category.choices)
    system_type = _facet(System.SystemType.choices)
    results_url = serializers.SerializerMethodField()

    class Meta:
        model = System
        fields = ["id", "url", "web_url", "round", "organization", "submitter", "slug", "name", "division", "status",
                  "availability", "category", "system_type", "number_of_nodes", "accelerators_per_node",
                  "accelerator_count", "host_processors_per_node", "host_processor_count", "accelerator_model_name",
                  "host_processor_model_name", "framework", "description_valid", "description_sha256",
                  "description", "created_at", "results_url"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_web_url(self, obj: System) -> str:
        return _absolute(self.context.get("request"), obj.get_absolute_url())

    @extend_schema_field(OpenApiTypes.URI)
    def get_results_url(self, obj: System) -> str:
        path = (f"{reverse('api:result-list')}?round={obj.round.slug}&submitter={obj.organization.slug}"
                f"&system={obj.slug}")
        return _absolute(self.context.get("request"), path)


class SystemApi(ReadApi):
    """System descriptions as submitted, with the facets Podium derives from them (division, category,
    system type, counts). A changed description is a new row with the same slug."""

    serializer_class = SystemOutput
    filterset_class = api_filters.SystemFilter

    def get_queryset(self) -> QuerySet[System]:
        return (visible_systems(self.request.user).select_related("round", "organization")
                .order_by(F("round__publication_date").desc(nulls_last=True), "organization__name", "slug", "pk"))

    def last_modified(self, obj: System) -> datetime.datetime | None:
        return _visible_since(obj.created_at, obj.round.publication_date)

    def count_key(self) -> str:
        """Each round's count of systems is kept as the results list's count is (docs/api.md): a system is
        stored with a result of its round, and every change of what may be seen of it moves that round's
        freshness."""
        return f"podium:api-count:systems:{self.sees}:{_filters_digest(self.request)}"

    def paginate_queryset(self, queryset: QuerySet[Any]) -> list[Any] | None:
        """The page's ids first, then its rows: no index serves the ordering (it spans three tables), and
        sorting every visible system whole (its description is the widest column) took 70 ms at 25,000.
        The ids are picked round by round (_RoundByRound): only the rounds the page reaches are sorted."""
        ids = super().paginate_queryset(cast(Any, _RoundByRound(queryset, count_key=self.count_key())))
        if ids is None:
            return None
        rows = {system.pk: system for system in queryset.order_by().filter(pk__in=ids)}
        return [rows[pk] for pk in ids]


class _RoundByRound:
    """The systems list's ids as the paginator reads them (its length, a slice), in the list's order: the
    newest round first, so the rounds published at one moment form one group, which the rest of the order
    (organization, slug, id) sorts whole. The systems are counted per round in one grouped query, and a
    slice sorts only the groups it reaches: 28 ms at 25,000 systems for sorting all of them, a page of one
    round sorts that round's."""

    def __init__(self, queryset: QuerySet[System], *, count_key: str) -> None:
        self.queryset = queryset
        self.count_key = count_key

    def counts(self) -> dict[int, int]:
        """The systems of each round that has any, counted as the results list's are (counts_by_round)."""
        kept, newer = counts_by_round(self.queryset, self.count_key)
        counts = {pk: n for pk, n in kept.items() if n}
        if newer is not None:
            counts.update(newer.values_list("round_id").annotate(n=Count("*")))
        return counts

    @cached_property
    def groups(self) -> list[tuple[list[int], int]]:
        """(rounds, systems) of each group, in the list's order."""
        counts = self.counts()
        dates = dict(Round.objects.filter(pk__in=counts).values_list("pk", "publication_date"))
        together: dict[datetime.datetime | None, list[int]] = defaultdict(list)
        for pk in sorted(counts):
            together[dates.get(pk)].append(pk)
        # Newest first, those without a date last: publication_date DESC NULLS LAST, as the ordering says.
        order = sorted(together, key=lambda date: (date is None, _desc(date)))
        return [(together[date], sum(counts[pk] for pk in together[date])) for date in order]

    def count(self) -> int:
        return sum(n for _, n in self.groups)

    def __getitem__(self, window: slice) -> list[int]:
        start, stop = window.start or 0, window.stop if window.stop is not None else self.count()
        ids: list[int] = []
        first = 0
        for rounds, n in self.groups:
            if first >= stop:
                break
            if first + n > start:
                ids += self.queryset.filter(round_id__in=rounds).values_list("pk", flat=True)[
                    max(start - first, 0):min(stop, first + n) - first]
            first += n
        return ids


# --- results, runs, findings --------------------------------------------------------------------------

def _derived(help_text: str) -> serializers.FloatField:
    return serializers.FloatField(read_only=True, allow_null=True, help_text=DERIVED + help_text)


class ResultOutput(serializers.ModelSerializer):
    """One (system, benchmark) in one round: the verdict, the official score, and derived figures."""

    url = serializers.HyperlinkedIdentityField(view_name="api:result-detail")
    web_url = serializers.SerializerMethodField()
    round = serializers.CharField(source="round.slug", read_only=True, help_text="Round slug")
    ruleset = serializers.CharField(source="round.ruleset", read_only=True, help_text="mlperf-logging ruleset")
    organization = serializers.CharField(source="organization.slug", read_only=True, help_text="Organization slug")
    system = serializers.CharField(source="system_slug", read_only=True, help_text="System slug")
    system_id = serializers.IntegerField(read_only=True, help_text="Id of the system description (systems/)")
    system_url = serializers.SerializerMethodField()
    benchmark = serializers.CharField(source="benchmark_key", read_only=True, help_text="Benchmark key")
    division = _facet(System.Division.choices)
    category = _facet(System.Category.choices)
    system_type = _facet(System.SystemType.choices)
    accelerators = serializers.IntegerField(source="accelerator_count", read_only=True, allow_null=True)
    hosts = serializers.IntegerField(source="host_count", read_only=True, allow_null=True,
                                     help_text="number_of_nodes of the system")
    host_processors = serializers.IntegerField(source="host_processor_count", read_only=True, allow_null=True)
    runs = serializers.IntegerField(source="runs_count", read_only=True, help_text="Run logs in the item")
    score = serializers.FloatField(read_only=True, allow_null=True,
                                   help_text="Time to train in minutes (olympic mean × scaling factor); null when "
                                             "none can be computed. It is the official score only where `official` "
                                             "is true")
    official = serializers.BooleanField(source="is_official", read_only=True,
                                        help_text="True for a verified result that was not withdrawn: only then is "
                                                  "`score` official, and only such results are ranked")
    accelerator_minutes = _derived("Score × accelerators.")
    host_minutes = _derived("Score × hosts.")
    cloud_scale = _derived("Accelerators + host processors / 8 + host memory in TiB.")
    cloud_scale_minutes = _derived("Score × cloud scale.")
    energy_kwh = _derived("Logged energy in kWh, where power was logged.")
    cost_to_train = _derived("Score / 60 × price per hour (USD), where the system gives a price.")
    runs_cv = _derived("Coefficient of variation of the counted runs' times.")
    superseded_by = serializers.IntegerField(source="superseded_by_id", read_only=True, allow_null=True,
                                             help_text="Id of the version that replaced this one")
    borrowed_from = serializers.IntegerField(source="borrowed_from_id", read_only=True, allow_null=True,
                                             help_text="Id of the result whose hyperparameters this version borrowed")
    reproduction = serializers.CharField(read_only=True, help_text="Newest judged reproduction: reproduced, "
                                                                   "mismatch, failed, or empty (not reproduced)")
    runs_url = serializers.SerializerMethodField()
    findings_url = serializers.SerializerMethodField()

    class Meta:
        model = Result
        fields = [
            "id", "url", "web_url", "round", "ruleset", "organization", "submitter", "system", "system_id",
            "system_url", "system_name", "benchmark", "division", "category", "system_type", "accelerator_model",
            "framework", "accelerators", "hosts", "host_processors", "host_memory_gb", "price_per_hour", "runs",
            "runs_required", "runs_compliant", "olympic_k", "raw_score", "scaling_factor", "scaling_source",
            "score", "official", "no_score_reason", "rcp_status", "rcp_message", "rcp_norm_factor", "verdict",
            "energy_j",
            "accelerator_minutes", "host_minutes", "cloud_scale", "cloud_scale_minutes", "energy_kwh",
            "cost_to_train", "runs_cv", "tool_version", "is_current", "superseded_by", "borrowed_from",
            "reproduction", "withdrawn_at", "created_at", "runs_url", "findings_url",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.URI)
    def get_web_url(self, obj: Result) -> str:
        return _absolute(self.context.get("request"), obj.get_absolute_url())

    @extend_schema_field(OpenApiTypes.URI)
    def get_system_url(self, obj: Result) -> str:
        return _absolute(self.context.get("request"), reverse("api:system-detail", args=[obj.system_id]))

    @extend_schema_field(OpenApiTypes.URI)
    def get_runs_url(self, obj: Result) -> str:
        return _absolute(self.context.get("request"), f"{reverse('api:run-list')}?result={obj.pk}")

    @extend_schema_field(OpenApiTypes.URI)
    def get_findings_url(self, obj: Result) -> str:
        return _absolute(self.context.get("request"), f"{reverse('api:finding-list')}?result={obj.pk}")


# What ResultOutput and last_modified read, and nothing else: a row of the list loads no description,
# digest or submission (a field missing here would cost one query per row, which the tests catch).
RESULT_COLUMNS = (
    "id", "round__slug", "round__ruleset", "round__publication_date", "organization__slug", "submitter",
    "system_slug", "system_id", "system_name", "benchmark_key", "division", "category", "system_type",
    "accelerator_model", "framework", "accelerator_count", "host_count", "host_processor_count", "host_memory_gb",
    "price_per_hour", "runs_count", "runs_required", "runs_compliant", "olympic_k", "raw_score", "scaling_factor",
    "scaling_source", "score", "no_score_reason", "rcp_status", "rcp_message", "rcp_norm_factor", "verdict",
    "energy_j", "accelerator_minutes", "host_minutes", "cloud_scale", "cloud_scale_minutes", "energy_kwh",
    "cost_to_train", "runs_cv", "tool_version", "is_current", "superseded_by_id", "borrowed_from_id",
    "reproduction", "withdrawn_at", "created_at",
)


def _iso_datetime(value: datetime.datetime, zone: datetime.tzinfo) -> str:
    """What DRF's DateTimeField writes with the default settings (ISO 8601 in the current time zone, UTC
    as Z), with the zone looked up once per page rather than per value (its lookups were a fifth of a
    page's CPU)."""
    value = value.astimezone(zone) if timezone.is_aware(value) else timezone.make_aware(value, zone)
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class ResultRows:
    """The results list's rows exactly as ResultOutput writes them, built from `values()` dicts: no model
    instance, no walk through the serializer's fields per row, no URL reversal per row. ResultOutput stays
    the one definition (the schema, the detail view); this follows its fields, and a test holds the two
    outputs equal."""

    URLS = ("url", "web_url", "system_url", "runs_url", "findings_url")

    def __init__(self) -> None:
        self.plan: list[tuple[str, str, Any]] = []
        for name, field in ResultOutput().fields.items():
            if name in self.URLS:
                self.plan.append((name, "", None))
            elif field.source == "is_official":
                self.plan.append((name, "", self.official))
            else:
                # DateTimeField formats (ISO 8601, Z); every other field returns the column's value as is.
                convert = None
                if isinstance(field, serializers.DateTimeField):
                    iso = str(getattr(field, "format", api_settings.DATETIME_FORMAT)).lower() == ISO_8601
                    convert = _iso_datetime if iso else field.to_representation
                self.plan.append((name, str(field.source).replace(".", "__"), convert))
        self.columns = sorted({column for _, column, _ in self.plan if column}
                              | {"id", "system_id", "verdict", "score", "withdrawn_at", "created_at",
                                 "round__publication_date"})

    @cached_property
    def sql_fields(self) -> list[api_sql.Field]:
        """The same plan for api_sql, which writes the rows in PostgreSQL."""
        links = {"url": "api:result-detail", "web_url": "leaderboard:result", "system_url": "api:system-detail"}
        fields = []
        for name, column, convert in self.plan:
            if name in links:
                before, after = around_id(links[name])
                fields.append(api_sql.Field(name, "link", "system_id" if name == "system_url" else "id", before, after))
            elif name in ("runs_url", "findings_url"):
                listing = reverse("api:run-list" if name == "runs_url" else "api:finding-list")
                fields.append(api_sql.Field(name, "query_link", "id", f"{listing}?result="))
            elif convert is self.official:
                fields.append(api_sql.Field(name, "boolean", "official"))  # annotated by rows_query
            elif convert is None:
                fields.append(api_sql.Field(name, _sql_kind(column), column))
            elif convert is _iso_datetime:
                fields.append(api_sql.Field(name, "iso", column))
            else:
                raise ValueError(f"{name}: no SQL form for {convert!r}")
        return fields

    def sql_rows(self, using: str) -> tuple[str, list[Any]]:
        """The columns api_sql reads for a page's ids, compiled once per process (core.compiled); `official` as
        the database computes it, from the one condition ranked() filters on."""
        return compiled.statement("leaderboard.api.result_rows", self.rows_query, {}, using)

    def rows_query(self, *, own: bool = False) -> QuerySet[Any]:
        """Every column the page reads (`own`: only Result's own, what leaderboard.kept_rows keeps beside its
        parts included: no join)."""
        official = ExpressionWrapper(ResultQuerySet.official_q(), output_field=BooleanField())
        if own:
            columns = sorted({c for c in self.columns if LOOKUP_SEP not in c} | set(kept_rows.COLUMNS))
        else:
            columns = self.columns
        return Result.objects.order_by().annotate(official=official).values(*columns, "official")

    def joins(self) -> list[kept_rows.Join]:
        """The columns of other tables the page reads, as the kept rows' source joins them (by the key a kept row
        holds: its result's foreign key)."""
        joins = []
        for column in self.columns:
            if LOOKUP_SEP not in column:
                continue
            relation, name = column.split(LOOKUP_SEP)  # one level: a deeper one is refused below
            field = Result._meta.get_field(relation)
            model = field.related_model
            key = cast(Any, field).column
            if key not in kept_rows.COLUMNS or model is None or isinstance(model, str):
                raise ValueError(f"{column}: the kept rows hold no key of {relation}")
            target: Any = model._meta.get_field(name)
            pk: Any = model._meta.pk
            joins.append(kept_rows.Join(column, model._meta.db_table, pk.column, target.column, key))
        return joins

    def kept(self, using: str) -> tuple[kept_rows.Kept, str]:
        """The rows' kept form (leaderboard.kept_rows) and the SQL of Result's own columns it is written from,
        with their values written in (the database's triggers run it)."""
        ops: Any = connections[using].ops  # PostgreSQL's: compose_sql is its own
        literal = cast(Callable[[str, Sequence[Any]], str], ops.compose_sql)
        own_sql, own_params = compiled.statement("leaderboard.api.result_own_rows",
                                                 lambda: self.rows_query(own=True), {}, using)
        source = literal(own_sql, own_params)
        form = api_sql.kept_form(self.sql_fields, lambda column: LOOKUP_SEP not in column, literal, self.joins(),
                                 source)
        return form, source

    @staticmethod
    def official(row: dict[str, Any]) -> bool:
        return row["verdict"] == Result.Verdict.VERIFIED and row["score"] is not None and row["withdrawn_at"] is None

    def rows(self, request: Request | None, page: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        base = request.build_absolute_uri("/")[:-1] if request is not None else ""
        detail, web, system = (around_id(view) for view in ("api:result-detail", "leaderboard:result",
                                                              "api:system-detail"))
        runs, findings = f"{base}{reverse('api:run-list')}?result=", f"{base}{reverse('api:finding-list')}?result="
        zone = timezone.get_current_timezone()
        out = []
        for row in page:
            pk = row["id"]
            urls = {"url": f"{base}{detail[0]}{pk}{detail[1]}", "web_url": f"{base}{web[0]}{pk}{web[1]}",
                    "system_url": f"{base}{system[0]}{row['system_id']}{system[1]}", "runs_url": f"{runs}{pk}",
                    "findings_url": f"{findings}{pk}"}
            item: dict[str, Any] = {}
            for name, column, convert in self.plan:
                if not column:
                    item[name] = urls[name] if convert is None else convert(row)
                    continue
                value = row[column]
                if value is None or convert is None:
                    item[name] = value
                elif convert is _iso_datetime:
                    item[name] = _iso_datetime(value, zone)
                else:
                    item[name] = convert(value)
            out.append(item)
        return out


# Django's column types that api_sql writes by type instead of through to_json (same text, less work).
_SQL_KINDS: dict[str, api_sql.Kind] = {
    **dict.fromkeys(("AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                     "SmallIntegerField", "PositiveIntegerField", "PositiveSmallIntegerField",
                     "PositiveBigIntegerField"), "integer"),
    "FloatField": "float",
    "BooleanField": "boolean",
}


def _sql_kind(column: str) -> api_sql.Kind:
    """How api_sql writes a values() column of Result (`round__slug`, `superseded_by_id`): by its type."""
    model: Any = Result
    *relations, name = column.split(LOOKUP_SEP)
    for relation in relations:
        model = model._meta.get_field(relation).related_model
    field = model._meta.get_field(name)
    if field.is_relation:
        field = field.target_field
    return _SQL_KINDS.get(field.get_internal_type(), "column")


@functools.cache
def _result_rows() -> ResultRows:
    """Built once per process: it walks the serializer's fields, which costs more than a page of rows."""
    return ResultRows()


@functools.cache
def kept_form(using: str) -> tuple[kept_rows.Kept, str]:
    """The results list's kept rows' form and source, once per process (leaderboard.kept_rows)."""
    return _result_rows().kept(using)


class ResultApi(ReadApi):
    """Results: current versions unless `?all_versions=1`; every facet of the tables as a filter."""

    serializer_class = ResultOutput
    filterset_class = api_filters.ResultFilter
    pagination_class = CountCachedPages

    def get_queryset(self) -> QuerySet[Result]:
        if getattr(self, "swagger_fake_view", False):  # the schema's generation: no request, no database read
            return Result.objects.none()
        # One row per result: the facts and derived figures are columns of Result itself, and the
        # default ordering is over Result's own columns, which an index serves (filters.RESULT_ORDERING).
        queryset = visible_results(self.request.user, now=self.now).order_by(*api_filters.RESULT_ORDERING)
        if self.action == "list":
            # narrow() reads values(), which drop select_related and only(): building them anyway cost
            # CPU on every page (the SQL is the same without them; bench/profile_api.py).
            return queryset
        return queryset.select_related("round", "organization").only(*RESULT_COLUMNS)

    @cached_property
    def freshness(self) -> str:
        """A list of one round's results (`?round=`) is about that round alone: a change confined to another
        round (an upload verified there) leaves its ETag, cached answer and count standing."""
        if self.action == "list":
            return cache.freshness(round_slug=self.request.query_params.get("round") or None)
        return cache.freshness()

    def count_key(self) -> str:
        """The list's count depends on the data (each round's part kept under its round's freshness: a
        result belongs to one round, CountedOnce), what the caller may see and the filters; not on the
        page, its size or the ordering."""
        return f"podium:api-count:results:{self.sees}:{_filters_digest(self.request)}"

    def counted_of_rounds(self, round_ids: list[int]) -> QuerySet[Result]:
        """The filtered results of those rounds the caller may see, for counting them after a change: the
        visibility rule decided per round from its dates (visible_results_of_rounds), so the count names the
        rounds by id and joins none. The list's own rows join every result's round to read its date: counting
        a filter's 18,680 results of 200,000 that way took 8 ms against 3-5 without the join (EXPLAIN
        ANALYZE, PostgreSQL). The dates are those the count's keys were made with (cache.round_dates): the
        rounds' ids come from there too, and reading them costs no query."""
        dates = cache.round_dates()
        rounds = [Round(pk=pk, publication_date=dates.get(pk)) for pk in round_ids]
        return self.filter_queryset(visible_results_of_rounds(self.request.user, rounds))

    @property
    def shape(self) -> ResultRows:
        return _result_rows()

    def narrow(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.values(*self.shape.columns)

    def list_rows(self, page: list[Any]) -> Any:
        return self.shape.rows(self.request, page)

    def list_page(self, etag: str) -> HttpResponse:
        if self.request.accepted_renderer.format != "json" or not api_sql.usable(Result.objects.all()):
            return super().list_page(etag)
        # What the page is built from besides its rows, kept per data version, grant and URL
        # (leaderboard.page_plans); its ids and rows are read below on every request.
        key = page_plans.key_of(self.request, self.freshness, self.sees)
        plan = page_plans.find(key)
        ids: list[int] | None = None
        if plan is None:
            plan, ids = self.plan()
            page_plans.keep(key, plan)
        using = Result.objects.db
        if ids is None:
            ids = api_sql.ids_of((plan.ids_sql, None) if plan.ids_sql is not None else None, using, prepare=True)
        kept = kept_form(using)[0] if kept_rows.available(connections[using]) else None
        rows, since, _ = api_sql.page_json(ids, self.shape.sql_rows(using), self.shape.sql_fields,
                                           self.request.build_absolute_uri("/")[:-1], self.now, using=using,
                                           kept=kept)
        response = HttpResponse(envelope(plan.head, rows), content_type="application/json")
        # What _stamped writes, the latest time computed by the database (_visible_since).
        return self._cache_headers(_last_modified(response, since), etag)

    def plan(self) -> tuple[page_plans.Plan, list[int]]:
        """The page's plan, built: its filters checked and applied, its ids statement compiled and run (the
        ids, read, come back with it: the next page's link may need the last one), its envelope written."""
        queryset = self.filter_queryset(self.get_queryset())
        pages = cast(CountCachedPages, self.paginator)
        self.counted = queryset
        page = pages.page_slice(queryset.values("pk"), self.request, self)
        statement = api_sql.ids_statement(page)
        # By cursor the ids are read already, in order.
        ids = pages.page_ids if pages.page_ids is not None else api_sql.ids_of(statement, page.db)
        pages.last_pk = ids[-1] if ids else None
        sql, params = statement if statement is not None else (None, [])
        literal = cast(Any, connections[page.db].ops).compose_sql  # PostgreSQL's (api_sql.usable)
        return page_plans.plan_of(sql, params, pages.head(), literal), list(ids)

    def last_modified(self, obj: Result | dict[str, Any]) -> datetime.datetime | None:
        if isinstance(obj, dict):  # a row of the list (narrow)
            return _visible_since(obj["created_at"], obj["round__publication_date"])
        return _visible_since(obj.created_at, obj.round.publication_date)


class EvalPoint(serializers.Serializer):
    minutes = serializers.FloatField(allow_null=True, help_text="Since run_start")
    epoch = serializers.FloatField(allow_null=True)
    samples = serializers.FloatField(allow_null=True)
    value = serializers.JSONField(help_text="eval_accuracy (or eval_error) as logged")


class RunOutput(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:run-detail")
    result = serializers.IntegerField(source="result_id", read_only=True, help_text="Result id")
    name = serializers.CharField(read_only=True, help_text="File name of the log")
    eval_curve = EvalPoint(many=True, read_only=True, help_text="Quality evaluations in log order")
    hyperparameters = serializers.DictField(read_only=True, child=serializers.JSONField())
    seeds = serializers.ListField(read_only=True, child=serializers.JSONField())
    logged = serializers.DictField(read_only=True, child=serializers.JSONField(),
                                   help_text="submission_* values the log declares")
    log_url = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "url", "result", "position", "name", "file", "sha256", "byte_count", "line_count",
                  "run_start_ms", "run_stop_ms", "time_to_train_min", "status", "compliant", "counted", "dropped",
                  "hyperparameters", "eval_curve", "seeds", "logged", "energy_j", "log_url"]
        read_only_fields = fields

    @extend_schema_field({"type": "string", "format": "uri", "nullable": True,
                          "description": "The log as uploaded; null when the result was imported from a "
                                         "results tree whose files Podium does not store"})
    def get_log_url(self, obj: Run) -> str | None:
        if not obj.result.submission.bundle_path:
            return None
        path = reverse("ingest:run_log", args=[obj.result_id, obj.position])
        return _absolute(self.context.get("request"), path)


class RunApi(ReadApi):
    """Runs with their evaluation curves; `?result=<id>` for one result's."""

    serializer_class = RunOutput
    filterset_class = api_filters.RunFilter
    pagination_class = CountCachedPages
    count_round_field = "result__round_id"

    def count_key(self) -> str | None:
        """Every run (ten a result) counted on each page was the list's largest count: kept round by round as
        the results list's is (docs/api.md). One result's runs are counted from its index at once."""
        if "result" in self.request.query_params:
            return None
        return f"podium:api-count:runs:{self.sees}:{_filters_digest(self.request)}"

    def get_queryset(self) -> QuerySet[Run]:
        return (visible_runs(self.request.user).select_related("result__round", "result__submission")
                .order_by("result_id", "position", "pk"))

    def last_modified(self, obj: Run) -> datetime.datetime | None:
        return _visible_since(obj.result.created_at, obj.result.round.publication_date)


class FindingOutput(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:finding-detail")
    result = serializers.IntegerField(source="result_id", read_only=True, allow_null=True, help_text="Result id")
    run = serializers.IntegerField(source="run_id", read_only=True, allow_null=True,
                                   help_text="Run id; null for a finding about the whole result")

    class Meta:
        model = Finding
        fields = ["id", "url", "result", "run", "severity", "checker", "rule", "file", "line", "message",
                  "detail", "excerpt"]
        read_only_fields = fields


class FindingApi(ReadApi):
    """What the checkers found; `?result=<id>` for one result's."""

    serializer_class = FindingOutput
    filterset_class = api_filters.FindingFilter
    pagination_class = CountCachedPages
    count_round_field = "submission__round_id"  # a finding about a result is of its result's submission

    def count_key(self) -> str | None:
        """As the runs list's (RunApi.count_key)."""
        if "result" in self.request.query_params or "run" in self.request.query_params:
            return None
        return f"podium:api-count:findings:{self.sees}:{_filters_digest(self.request)}"

    def get_queryset(self) -> QuerySet[Finding]:
        # Findings about a whole submission (staff only) have no result: last on every database, as a cursor
        # past the first pages needs (leaderboard.keyset).
        return (visible_findings(self.request.user).select_related("result__round")
                .order_by(F("result_id").asc(nulls_last=True), "pk"))

    def last_modified(self, obj: Finding) -> datetime.datetime | None:
        if obj.result is None:  # only staff see findings about a whole submission
            return None
        return _visible_since(obj.result.created_at, obj.result.round.publication_date)

