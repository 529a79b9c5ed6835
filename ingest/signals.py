"""What other apps may react to, without ingest knowing them (reviews checks borrowings here)."""

from django.dispatch import Signal

# Sent after a submission's verification has ended (any final state), outside its transactions.
# Arguments: submission.
submission_finished = Signal()
