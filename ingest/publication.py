"""Keeps Result.round_publication_date, the indexable copy of its round's publication date, in step.

A round's dates change through catalog (round_create, the catalog sync, the admin) and ingest
(round_phase_set), always by saving the round; catalog may not import ingest, so ingest listens to
Round's post_save here. Only orderings read the copy (the API's newest-round-first list); the embargo
reads the round's own date, so a copy that lagged (a bare `Round.objects.update()`) could misorder a
list, never show a result early.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save, pre_save

from catalog.models import Round
from ingest.models import Result


def _result_inserting(sender: type[Result], instance: Result, raw: bool = False, **kwargs: Any) -> None:
    if raw or not instance._state.adding or instance.round_publication_date is not None:
        return
    # The round is already loaded wherever results are stored (result_store, the factories).
    instance.round_publication_date = instance.round.publication_date


def _round_saved(sender: type[Round], instance: Round, raw: bool = False,
                 update_fields: frozenset[str] | None = None, **kwargs: Any) -> None:
    if raw or (update_fields is not None and "publication_date" not in update_fields):
        return
    published = instance.publication_date
    # One UPDATE that touches only the rows whose copy differs: nothing at all on an unchanged date.
    stale = Result.objects.filter(round_id=instance.pk)
    if published is None:
        stale = stale.filter(round_publication_date__isnull=False)
    else:
        stale = stale.exclude(round_publication_date=published)
    stale.update(round_publication_date=published)

def connect() -> None:
    """Called once from IngestConfig.ready()."""
    pre_save.connect(_result_inserting, sender=Result, dispatch_uid="ingest.publication.result")
    post_save.connect(_round_saved, sender=Round, dispatch_uid="ingest.publication.round")
