"""The guides in docs/ served as pages: a fixed allow-list of files (a name never becomes a path) and a
small Markdown renderer for what the guides use — headings, paragraphs, fenced and indented code, lists,
tables, block quotes, inline code, emphasis and links.

Safe by construction: every piece of source text is HTML-escaped before any markup is added, and a link
keeps only an http(s), site-relative or in-page target; a link to another guide (`submitting.md#uploading`)
becomes that guide's page. No Markdown library ships with Podium, and the guides are ours, but the
renderer is written as if they were not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


@dataclass(frozen=True)
class Guide:
    name: str
    title: str
    summary: str

    @property
    def path(self) -> Path:
        return DOCS / f"{self.name}.md"


GUIDES: dict[str, Guide] = {guide.name: guide for guide in (
    Guide("browsing", "Browsing results", "the tables, derived figures, charts, benchmark and organization pages, "
          "the log viewer, search"),
    Guide("verification", "How results are verified", "what Podium checks and how a score is computed"),
    Guide("submitting", "Submitting results", "accounts, tokens, bundles, the upload page, the API and the CLI"),
    Guide("reviewing", "Reviewing a round", "flags, answers, resubmissions, chairs' decisions, borrowing"),
    Guide("api", "The read API", "endpoints, filters, ordering, authentication, the embargo"),
    Guide("runners", "Reproduction on runners", "runners, the agent, jobs and their verdicts"),
    Guide("operating", "Operating Podium", "settings, throttles, cleanup, storage, backup and restore"),
    Guide("architecture", "How Podium is built", "the apps, a submission's way, where each rule lives"),
)}


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it, so links written for GitHub land here too."""
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_GUIDE_LINK = re.compile(r"^(?:\.{0,2}/)?(?:docs/)?([a-z]+)\.md(#[\w\-]*)?$")


def _href(target: str, base: str) -> str | None:
    """A safe href for a Markdown link target, or None (the text is kept, the link dropped)."""
    guide = _GUIDE_LINK.match(target)
    if guide:
        if guide.group(1) not in GUIDES:
            return None
        return f"{base}{guide.group(1)}/{guide.group(2) or ''}"
    if re.match(r"^https?://[^\s\"'<>]+$", target) or re.match(r"^#[\w\-]+$", target):
        return target
    if re.match(r"^/[\w\-./]*$", target) and ".." not in target:
        return target
    return None


def inline(text: str, base: str = "/guides/") -> str:
    """One line of Markdown as HTML. Code spans are cut out first (their text is never interpreted)."""
    pieces = _CODE.split(text)
    out = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(f"<code>{escape(piece)}</code>")
            continue
        html = escape(piece, quote=False)

        def link(match: re.Match[str]) -> str:
            label, target = match.group(1), match.group(2)
            href = _href(target.replace("&amp;", "&"), base)
            return label if href is None else f'<a href="{escape(href)}">{label}</a>'

        html = _LINK.sub(link, html)
        html = _BOLD.sub(r"<strong>\1</strong>", html)
        html = _ITALIC.sub(r"<em>\1</em>", html)
        out.append(html)
    # A link whose label holds a code span is split by it and stays text: the guides write none.
    return "".join(out)


def _table(rows: list[str], base: str) -> str:
    def cells(row: str) -> list[str]:
        row = row.strip()
        row = row[1:] if row.startswith("|") else row
        row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
        return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)]

    head, body = cells(rows[0]), [cells(r) for r in rows[2:]]
    html = ["<table class=\"data\"><thead><tr>", *(f"<th>{inline(c, base)}</th>" for c in head), "</tr></thead><tbody>"]
    for row in body:
        html.append("<tr>" + "".join(f"<td>{inline(c.replace(chr(92) + '|', '|'), base)}</td>" for c in row) + "</tr>")
    html.append("</tbody></table>")
    return "".join(html)


def render(source: str, base: str = "/guides/") -> tuple[str, str]:
    """(title, HTML) of a Markdown document; the title is its first level-one heading."""
    lines = source.splitlines()
    html: list[str] = []
    title = ""
    paragraph: list[str] = []
    i = 0

    def flush() -> None:
        if paragraph:
            html.append(f"<p>{inline(' '.join(paragraph), base)}</p>")
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        # Code blocks scroll sideways on phones: tabindex lets a keyboard reach and scroll them (axe).
        if stripped.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            html.append(f"<pre tabindex=\"0\"><code>{escape(chr(10).join(block))}</code></pre>")
            i += 1
            continue
        heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*$", line)
        if heading:
            flush()
            level, text = len(heading.group(1)), heading.group(2)
            if level == 1 and not title:
                title = re.sub(r"[`*]", "", text)
            rendered = inline(text, base)
            html.append(f'<h{level} id="{escape(slug(rendered))}">{rendered}</h{level}>')
            i += 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|?\s*:?-{2,}", lines[i + 1]):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i])
                i += 1
            html.append(_table(rows, base))
            continue
        item = re.match(r"^(\s*)([-*]|\d+[.)])\s+(.*)$", line)
        if item and not paragraph:
            flush()
            ordered = item.group(2)[0].isdigit()
            tag = "ol" if ordered else "ul"
            items: list[str] = []
            while i < len(lines):
                current = re.match(r"^(\s*)([-*]|\d+[.)])\s+(.*)$", lines[i])
                if current:
                    items.append(current.group(3))
                elif lines[i].strip() and lines[i].startswith((" ", "\t")) and items:
                    items[-1] += " " + lines[i].strip()  # a continuation line of the item
                else:
                    break
                i += 1
            html.append(f"<{tag}>" + "".join(f"<li>{inline(it, base)}</li>" for it in items) + f"</{tag}>")
            continue
        if line.startswith("    ") and not paragraph:
            flush()
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
            html.append(f"<pre tabindex=\"0\"><code>{escape(chr(10).join(block).rstrip())}</code></pre>")
            continue
        if stripped.startswith(">"):
            flush()
            quoted = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                quoted.append(lines[i].strip()[1:].strip())
                i += 1
            html.append(f"<blockquote><p>{inline(' '.join(quoted), base)}</p></blockquote>")
            continue
        if not stripped:
            flush()
        else:
            paragraph.append(stripped)
        i += 1
    flush()
    return title, "\n".join(html)


def load(name: str) -> Guide | None:
    """The guide of that name from the allow-list; None for any other name (never a path)."""
    return GUIDES.get(name)
