"""Moving a round between phases by its dates, for demos, tests and operators (manage.py round_phase)."""

from __future__ import annotations

import datetime

from django.db import transaction
from django.utils import timezone

from accounts.services import Actor, audit_record
from catalog.models import Round
from core.cache import bump_generation
from core.errors import BadRequest, Conflict
from ingest.models import Submission

PHASES = (Round.Phase.OPEN, Round.Phase.REVIEW, Round.Phase.PUBLISHED)


@transaction.atomic
def round_phase_set(*, round: Round, phase: str, actor: Actor, force: bool = False,
                    now: datetime.datetime | None = None) -> Round:
    """Set the round's dates so that it is in `phase` now: open a week, review three weeks, then published.
    A round that holds real (not demo) submissions is refused unless forced: its dates are a record."""
    if phase not in PHASES:
        raise BadRequest(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    round = Round.objects.select_for_update().get(pk=round.pk)
    if not force and not round.is_demo and Submission.objects.filter(round=round).exists():
        raise Conflict(f"{round.slug} holds submissions; its dates are part of the record (use --force to move "
                       "them anyway)")
    now = now or timezone.now()
    day = datetime.timedelta(days=1)
    dates: dict[str, tuple[datetime.datetime, datetime.datetime]] = {
        Round.Phase.OPEN: (now + 7 * day, now + 30 * day),
        Round.Phase.REVIEW: (now - day, now + 20 * day),
        Round.Phase.PUBLISHED: (now - 30 * day, now - day),
    }
    deadline, publication = dates[phase]
    before = {name: str(getattr(round, name)) for name in ("submission_deadline", "review_start", "review_end",
                                                           "publication_date", "closes_at")}
    round.submission_deadline, round.review_start, round.review_end = deadline, deadline, publication
    round.publication_date, round.closes_at = publication, None
    round.save(update_fields=["submission_deadline", "review_start", "review_end", "publication_date", "closes_at"])
    audit_record(actor=actor, action="round.phase", subject=round, before=before,
                 after={"phase": phase, "submission_deadline": deadline.isoformat(),
                        "publication_date": publication.isoformat()})
    bump_generation()  # on commit: cached round pages and API answers show the new dates
    assert round.phase(now) == phase
    return round
