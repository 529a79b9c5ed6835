"""The submitter is who uploads: a bundle's <org>/ folder and every system description's `submitter`
must name the uploading organization. Names are compared the way MLCommons writes them in different
places ("Larkspur_Compute", "Larkspur Compute", "larkspur-compute"): case and punctuation aside.

Pure Python: the engine's reports in, findings added to them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from ingest.engine.findings import ERROR, Finding
from ingest.engine.verify import ItemReport


def normalized(name: str) -> str:
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().casefold()
    return re.sub(r"[^a-z0-9]+", "", folded)


def check_submitter(*, names: Iterable[str], folder: str, reports: list[ItemReport]) -> None:
    """Add an error finding to every item whose folder or system description names another submitter."""
    accepted = {normalized(n) for n in names if normalized(n)}
    shown = " / ".join(sorted(set(names)))
    folder_ok = normalized(folder) in accepted
    for report in reports:
        where = f"{report.org}/systems/{report.system}.json"
        if not folder_ok:
            report.findings.append(Finding(
                ERROR, "submitter", "folder",
                f"the bundle's submitter folder is {folder!r}, but it was uploaded by {shown}; "
                "upload it from the organization it names, or rename the folder", folder))
        written = report.system_facts.description.get("submitter") if report.system_facts.parsed else None
        if isinstance(written, str) and normalized(written) not in accepted:
            report.findings.append(Finding(
                ERROR, "submitter", "submitter",
                f"the system description names the submitter {written!r}, but it was uploaded by {shown}; "
                "a result is published under the organization that uploads it", where))
        elif written is not None and not isinstance(written, str):
            report.findings.append(Finding(
                ERROR, "submitter", "submitter", f"the system description's submitter is {written!r}, not a name",
                where))
