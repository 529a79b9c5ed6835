from __future__ import annotations

from typing import Any

from django import template
from django.template import Context
from django.templatetags.static import static

from ingest.panels import Panel
from leaderboard.static_files import PLOTLY_JS

register = template.Library()


@register.filter
def minutes(value: float | None) -> str:
    """Scores as MLCommons prints them: minutes with two decimals, a dash for none."""
    return "—" if value is None else f"{value:,.2f}"


@register.filter
def exact(value: float | None) -> str:
    """Full precision, so a reader can recompute a score by hand."""
    return "—" if value is None else repr(value)


@register.filter
def kwh(joules: float | None) -> str:
    return "—" if joules is None else f"{joules / 3.6e6:,.3f} kWh"


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key)


@register.filter
def as_text(value: Any) -> str:
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, indent=1, sort_keys=False)
    return "" if value is None else str(value)


@register.simple_tag
def plotly_js() -> str:
    """The URL of plotly.js (leaderboard.static_files), made by the staticfiles storage as {% static %} makes it."""
    return static(PLOTLY_JS)


@register.filter
def attr_of(obj: Any, name: str) -> Any:
    return getattr(obj, name, "")


@register.simple_tag(takes_context=True)
def sort_link(context: dict[str, Any], view: Any, key: str) -> str:
    """The current view's URL, sorted by `key`; a second click on the same column reverses it."""
    request = context["request"]
    params = request.GET.copy()
    params["sort"] = key
    if view.sort == key and not view.descending:
        params["order"] = "desc"
    else:
        params.pop("order", None)
    return f"?{params.urlencode()}"


@register.simple_tag(takes_context=True)
def panel(context: Context, panel: Panel) -> str:
    """Render a panel another app contributes to a page (ingest.panels), with its own context on top."""
    template = context.template.engine.get_template(panel.template)
    with context.push(**panel.context):
        return template.render(context)
