"""Writes of the ingest app. `results` stores verified items; `submissions` runs the upload lifecycle."""

from ingest.services.results import (
    audit_record,
    db_safe,
    organization_get_or_create,
    result_store,
    submission_finish,
    submission_open,
)

__all__ = [
    "audit_record",
    "db_safe",
    "organization_get_or_create",
    "result_store",
    "submission_finish",
    "submission_open",
]
