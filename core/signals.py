"""Events the domain announces and others may listen to (monitoring counts them).

The domain apps send these; they import nothing of who listens. `monitoring` connects its
receivers in its AppConfig.ready, so a domain app never imports `monitoring`.
"""

from django.db import transaction
from django.dispatch import Signal

# One sync call was recorded (its audit row committed): endpoint (the audit's value), outcome
# (the audit's value), duration (seconds), updated, unknown, stale (item counts).
sync_call_recorded = Signal()

# One acknowledgement call was answered: result ("acknowledged", "repeated", "conflict",
# "not_found").
acknowledgement_recorded = Signal()

# One placement call was answered: result ("created", "replayed", "short", "refused").
order_placement_recorded = Signal()

# What became of an order changed (not a repeat of its status): status (the new one), by
# ("shop", "partner" or "staff").
order_status_changed = Signal()

# One shipment call was answered: result ("recorded", "repeated", "conflict": refused with 409).
shipment_recorded = Signal()

# A full snapshot changed state: outcome ("committed", "held", "expired", "abandoned"), zeroed
# (the levels a commit set to 0; 0 for the other outcomes).
snapshot_recorded = Signal()


def send_at_commit(signal: Signal, **kwargs) -> None:
    """Send `signal` once the current transaction commits (at once outside a transaction): a
    rolled-back change, or an attempt retried after a deadlock, is announced never or once."""
    transaction.on_commit(lambda: signal.send(sender=None, **kwargs))
