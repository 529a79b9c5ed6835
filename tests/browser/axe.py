"""Page checks for the browser tests: axe-core (vendored, no network), sideways overflow, screenshots.

axe-core is the npm package `axe-core`, pinned in package.json and copied unchanged into
tests/browser/vendor/axe-core/ (see the README there); Podium never serves it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AXE_VERSION = "4.14.1"
AXE_JS = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
BLOCKING_IMPACTS = ("serious", "critical")
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Violation:
    rule: str
    impact: str
    help: str
    targets: tuple[str, ...]

    def __str__(self) -> str:
        shown = ", ".join(self.targets[:4]) + (f" (+{len(self.targets) - 4} more)" if len(self.targets) > 4 else "")
        return f"{self.rule} [{self.impact}] {self.help}: {shown}"


def axe_violations(page: Any, impacts: tuple[str, ...] = BLOCKING_IMPACTS) -> list[Violation]:
    """Run axe-core on the page as it is now (WCAG 2.x A/AA rules and best practices)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    version = page.evaluate("() => window.axe.version")
    assert version == AXE_VERSION, f"vendored axe-core is {version}, expected {AXE_VERSION}"
    results = page.evaluate("""async () => {
        const r = await window.axe.run(document, {resultTypes: ["violations"]});
        return r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
                                       targets: v.nodes.map(n => n.target.join(" "))}));
    }""")
    return [Violation(v["id"], v["impact"], v["help"], tuple(v["targets"]))
            for v in results if v["impact"] in impacts]


# Elements wider than the viewport that are not inside an explicit scroll container (overflow-x auto or
# scroll): what makes a phone page scroll sideways. Capped so a broken page still reports briefly.
_OVERFLOW_JS = """() => {
    const doc = document.documentElement;
    const width = doc.clientWidth;
    const inScroller = (el) => {
        for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
            const o = getComputedStyle(p).overflowX;
            if (o === "auto" || o === "scroll" || o === "hidden" || o === "clip") return true;
        }
        return false;
    };
    const culprits = [];
    for (const el of document.body.querySelectorAll("*")) {
        const box = el.getBoundingClientRect();
        if (box.width === 0 || box.right <= width + 1 || inScroller(el)) continue;
        const parent = el.parentElement;
        if (parent && parent.getBoundingClientRect().right > width + 1 && !inScroller(parent)
            && parent !== document.body) continue;  // report the outermost offender only
        const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
            + (el.classList.length ? "." + Array.from(el.classList).join(".") : "");
        culprits.push(name + " (right edge " + Math.round(box.right) + " px)");
        if (culprits.length >= 8) break;
    }
    return {scrollWidth: doc.scrollWidth, clientWidth: width, culprits};
}"""


def sideways_overflow(page: Any) -> dict[str, Any] | None:
    """None when the page fits its viewport's width; else the widths and the outermost offenders."""
    found = page.evaluate(_OVERFLOW_JS)
    return found if found["scrollWidth"] > found["clientWidth"] else None


def artifacts_dir() -> Path:
    path = Path(os.environ.get("PODIUM_ARTIFACTS") or ROOT / "var" / "artifacts" / "screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path
