"""Replaying an applied sync to a retry that validation alone would refuse."""

from __future__ import annotations

from django.utils import timezone

from catalog.models import SyncAudit
from catalog.schemas import SyncContext
from catalog.services import SyncClient, SyncResult, idempotency_stored, sync_audit_create


def sync_replay_of_applied(
    *,
    client: SyncClient,
    single: bool,
    request_id: str,
    body_hash: str,
    context: SyncContext | None,
    received: int,
    started: float,
) -> SyncResult | None:
    """The stored result of an applied request with this key, request_id and canonical body.

    For a request that fails validation: its body may still canonicalise equal to one that was
    applied (numbers spelt otherwise), and then its answer is the original one. Audited as a
    replay; None (and nothing written) when there is no such request within the retention
    window.
    """
    stored = idempotency_stored(
        client=client,
        single=single,
        request_id=request_id,
        body_hash=body_hash,
        now=timezone.now(),
    )
    if stored is None:
        return None
    result = SyncResult.from_stored(stored)
    sync_audit_create(
        client=client,
        single=single,
        request_id=request_id,
        context=context,
        outcome=SyncAudit.Outcome.REPLAYED,
        status_code=200,
        started=started,
        received=received,
        updated=result.updated,
        unknown=result.unknown,
        stale=result.stale,
    )
    return result
