"""Writes of the ingest app. `results` stores verified items; `submissions` runs the upload lifecycle."""

from ingest.services.results import db_safe, result_store, submission_finish, submission_open

__all__ = [
    "db_safe",
    "result_store",
    "submission_finish",
    "submission_open",
]
