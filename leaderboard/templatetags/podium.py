from __future__ import annotations

from typing import Any

from django import template
from django.template import Context
from django.templatetags.static import static

from ingest.panels import Panel
from leaderboard import formatting, selectors
from leaderboard.logs import excerpt, line_url, run_for_file
from leaderboard.pages import FindingGroup, severity_counts
from leaderboard.static_files import PLOTLY_JS

register = template.Library()


@register.filter(name="minutes")
def minutes_filter(value: float | None) -> str:
    """Minutes as leaderboard.formatting prints them (two decimals, as MLCommons), a dash for none."""
    return formatting.minutes(value)


@register.filter(name="exact")
def exact_filter(value: float | None) -> str:
    """Full precision, for a title attribute or a derivation a reader recomputes by hand."""
    return formatting.exact(value)


@register.filter(name="energy")
def energy_filter(joules: float | None) -> str:
    """Joules as kWh with three significant digits."""
    return formatting.energy(joules)


@register.filter(name="kwh")
def kwh_filter(joules: float | None) -> str:
    return formatting.energy(joules)


@register.filter(name="count")
def count_filter(value: int | None) -> str:
    """Whole numbers with thousands separators."""
    return formatting.count(value)


@register.filter(name="figure")
def figure_filter(value: float | None, digits: int = formatting.FIGURE_DIGITS) -> str:
    """A derived figure with three (or `digits`) significant digits."""
    return formatting.figure(value, int(digits))


@register.filter(name="trimmed")
def trimmed_filter(value: float | None) -> str:
    """A term of a derivation: 12 significant digits, no floating-point noise (`12.948949999999998` → `12.94895`)."""
    return formatting.trimmed(value)


@register.filter(name="pretty_json")
def pretty_json_filter(value: Any) -> str:
    """A JSON value (a job's config, a hyperparameter table) indented for reading, as JSON, not as a Python dict."""
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


# The functions by their filter names too, for Python callers (tests import `minutes`).
minutes = minutes_filter
exact = exact_filter
kwh = kwh_filter


@register.filter(name="human")
def human_filter(key: Any) -> str:
    """A readable label for a key that has no declared label (prefer get_FOO_display where there is one)."""
    return formatting.human_label(key)


@register.simple_tag(name="scale_text")
def scale_text_tag(accelerators: Any, model: Any, hosts: Any) -> str:
    """{% scale_text system.accelerator_count system.accelerator_model_name system.number_of_nodes %}."""
    return formatting.scale(accelerators, model, hosts)


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


# --- issue 15: log links, flag anchors, navigation, system history ----------------------------------


@register.simple_tag
def log_url(result_pk: int, position: int, line: int | None = None) -> str:
    """The log viewer at a run's log (and at `line`, when given)."""
    return line_url(result_pk, position, line)


@register.simple_tag
def finding_log_url(finding: Any, runs: list[Any]) -> str:
    """Where a finding's file and line open in the log viewer; empty when it names no run's log."""
    run = next((r for r in runs if r.pk == finding.run_id), None) if finding.run_id else None
    run = run or run_for_file(list(runs), finding.file)
    if run is None:
        return ""
    return line_url(run.result_id, run.position, finding.line)


@register.simple_tag
def flag_anchor(flag: Any) -> dict[str, Any] | None:
    """A flag's cited file and line: the viewer's URL there and the line's text (None without an anchor)."""
    runs = list(flag.result.runs.all())
    run = flag.run if flag.run_id else run_for_file(runs, flag.anchor_file)
    if run is None:
        return None
    line = flag.anchor_line
    return {"url": line_url(run.result_id, run.position, line), "run": run, "line": line,
            "excerpt": excerpt(run, line) if line else None}


@register.simple_tag(takes_context=True)
def persona_links(context: Context) -> list[Any]:
    request = context.get("request")
    return selectors.persona_links(request.user) if request is not None else []


@register.simple_tag(takes_context=True)
def system_history(context: Context, system: Any) -> list[Any]:
    """The same system in every round the visitor may see (leaderboard.selectors.system_history)."""
    request = context.get("request")
    return selectors.system_history(request.user, system) if request is not None else []


@register.filter
def severity_sorted(findings: Any) -> list[Any]:
    """Errors first, then warnings, then notes; by line within each."""
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: (order.get(f.severity, 3), f.line or 0, f.pk or 0))


@register.filter
def findings_by_severity(findings_by_file: dict[str, list[Any]]) -> list[FindingGroup]:
    """A {file: findings} mapping as groups with severity counts, the groups with errors (then warnings)
    first and errors first within each; a group is open when it holds an error or a warning."""
    groups = [FindingGroup(file=file, findings=severity_sorted(findings), counts=severity_counts(findings), run=None)
              for file, findings in findings_by_file.items()]
    groups.sort(key=lambda g: (-g.counts["error"], -g.counts["warning"], g.file))
    return groups
