"""One way to tell people something: a row on their Notifications page and the same words by e-mail.

Every event a user hears about by e-mail (a verdict of their organization's submission, a flag on its
results, an answer or comment, a chair's decision, a reproduction's verdict) goes through here, so the page
and the mailbox never disagree. Apps below reviews cannot import it (docs/architecture.md); they send
ingest's `organization_notified` signal, which ReviewsConfig.ready() connects to `notify_organization`.

Mails that carry a secret or go to an address that is no user yet (invitations, password links) are not
events and stay in accounts.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from core import compiled, jsonrows
from reviews.models import Notification

TEXT_LIMIT = 300  # Notification.text


def notify_users(*, users: Iterable[User], text: str, url: str = "", subject: str = "", detail: str = "") -> int:
    """Store a notification for each user and mail those with an address; the number of users told.

    `subject` defaults to the text; `detail` adds lines to the mail's body after the text.
    """
    unique = list({u.pk: u for u in users}.values())
    if not unique:
        return 0
    # As bulk_create, by a statement prepared once per connection on PostgreSQL (core.jsonrows).
    jsonrows.bulk_insert([Notification(user=u, text=text[:TEXT_LIMIT], url=url[:300]) for u in unique])
    recipients = sorted({u.email for u in unique if u.email})
    if recipients:
        body = "\n".join(part for part in (text, detail) if part)
        link = f"\n\n{settings.PODIUM_BASE_URL}{url}\n" if url else "\n"
        send_mail(subject=f"[Podium] {(subject or text)[:160]}", message=body + link, from_email=None,
                  recipient_list=recipients,
                  fail_silently=True)  # mail trouble must not undo the event; the page still has it
    return len(unique)


def notify_organization(*, organization: Organization, text: str, url: str = "", subject: str = "",
                        detail: str = "") -> int:
    """Tell every member of `organization`, whatever their role."""
    # Read by a statement built once per process (core.compiled), with the two columns a notification needs: every
    # verdict tells its organization right after its commit, while the web server answers the client waiting for it.
    users = compiled.objects("reviews.notify.members", lambda: User.objects.filter(
        memberships__organization_id=_ORGANIZATION, is_active=True).distinct().only("id", "email").order_by(),
        {_ORGANIZATION: organization.pk}, prepare=True)
    return notify_users(users=users, text=text, url=url, subject=subject, detail=detail)


_ORGANIZATION = compiled.ids(1)[0]


@transaction.atomic
def notifications_seen(*, user: User) -> int:
    """Mark the user's unread notifications read; how many were. Not audited: a read receipt changes
    nothing anyone else sees, and one audit row per page view would bury the record."""
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=timezone.now())
