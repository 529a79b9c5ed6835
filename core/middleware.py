"""Refusing, before any view runs, an address that carries a NUL character.

Why: PostgreSQL text cannot hold a NUL, and a query naming one fails ("text fields cannot contain NUL"):
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
