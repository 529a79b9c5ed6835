"""What other apps may react to, without ingest knowing them (reviews checks borrowings here)."""

from django.dispatch import Signal

# Sent after a submission's verification has ended (any final state), outside its transactions.
# Arguments: submission.
submission_finished = Signal()

# Tell every member of an organization something (a verdict, a reproduction's outcome): reviews stores it on
# their Notifications page and mails it (reviews/notify.py). Apps below reviews send this instead of mailing.
# Arguments: organization, text, url, subject (optional, for the mail), detail (optional, more lines for the mail).
organization_notified = Signal()
