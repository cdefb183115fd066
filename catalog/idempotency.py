"""Replaying an applied sync to a retry that validation alone would refuse."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from catalog.models import IdempotencyRecord, SyncAudit
from catalog.schemas import SyncContext
from catalog.services import SyncClient, SyncResult, sync_audit_create, sync_endpoint


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
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_RETENTION_HOURS)
    stored = (
        IdempotencyRecord.objects.filter(
            api_key_id=client.key_id,
            endpoint=sync_endpoint(single=single),
            request_id=request_id,
            body_hash=body_hash,
            created_at__gte=cutoff,
            response__isnull=False,
        )
        .values_list("response", flat=True)
        .first()
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
    )
    return result
