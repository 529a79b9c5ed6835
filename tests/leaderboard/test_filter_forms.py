"""The API's filter forms share their fields rather than deep-copying them per request
(leaderboard.filters.LeanFilterSet): each form still cleans its own query string and keeps its own dict."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from leaderboard.filters import ResultFilter, SystemFilter


def _form(filterset_class: type, query: str):  # -> a bound filter form
    return filterset_class(QueryDict(query)).form


def test_forms_share_the_declared_fields_instead_of_copying_them() -> None:
    first, second = _form(ResultFilter, "division=closed"), _form(ResultFilter, "division=open")
    for name in ("division", "ordering", "accelerators_min"):
        assert first.fields[name] is second.fields[name]
    assert first.fields is not second.fields
    first.fields.pop("division")  # a form changing its own set of fields changes no other form's
    assert "division" in second.fields and "division" in _form(ResultFilter, "").fields


@pytest.mark.parametrize(("filterset_class", "ordering"), [(ResultFilter, "-id"), (SystemFilter, "-created_at")])
def test_each_form_cleans_its_own_query_string(filterset_class: type, ordering: str) -> None:
    good = _form(filterset_class, f"ordering={ordering}")
    bad = _form(filterset_class, "ordering=no-such-field")
    assert bad.is_valid() is False and "ordering" in bad.errors
    assert good.is_valid(), good.errors
    assert [str(value) for value in good.cleaned_data["ordering"]] == [ordering]


def test_a_rejected_value_leaves_the_next_form_clean() -> None:
    rejected = _form(ResultFilter, "division=bogus&accelerators_min=many")
    assert not rejected.is_valid()
    assert set(rejected.errors) == {"division", "accelerators_min"}
    accepted = _form(ResultFilter, "division=closed&accelerators_min=8")
    assert accepted.is_valid(), accepted.errors
    assert accepted.cleaned_data["division"] == "closed" and accepted.cleaned_data["accelerators_min"] == 8
