"""The sync's audit: one recorder for every outcome of operations 1 and 2.

Applied, replayed, paused, dry run and refused (every 4xx answer: invalid requests, unknown
keys, and the 401, 413 and 429 given before the body is read) all leave their one row here, and
are counted (`core.signals.sync_call_recorded`) once the row is committed.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction

from catalog.models import SyncAudit
from catalog.schemas import SyncContext
from core.problems import Problem
from core.signals import sync_call_recorded
from sync.call import SyncCall

logger = logging.getLogger(__name__)

# Every outcome but a refusal is answered 200; a refusal's status is the answer's (4xx).
ANSWERED_OK = 200


def sync_context_columns(context: SyncContext | dict[str, Any] | None) -> dict[str, str | None]:
    """The audit row's columns of a sync_context (also kept for a replay's audit row)."""
    if isinstance(context, dict):
        return context
    return {
        "source_type": context.source_type.value if context else None,
        "source_ref": context.source_ref if context else None,
        "note": context.note if context else None,
        "actor": context.actor if context else None,
        # As text: the columns are also kept as JSON with the idempotency record.
        "posted_at": context.posted_at.isoformat() if context and context.posted_at else None,
    }


def _posted_at_column(value: str | datetime | None) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def record(
    call: SyncCall,
    outcome: str,
    *,
    status_code: int = ANSWERED_OK,
    updated: int = 0,
    unknown: int = 0,
    stale: int = 0,
    error_summary: str = "",
) -> SyncAudit:
    """Leave the audit row of one sync call, and count the call once its row is committed."""
    columns = sync_context_columns(call.context)
    endpoint = call.endpoint
    transaction.on_commit(
        lambda: sync_call_recorded.send(
            sender=SyncAudit,
            endpoint=endpoint,
            outcome=outcome,
            duration=time.perf_counter() - call.started,
            updated=updated,
            unknown=unknown,
            stale=stale,
        )
    )
    return SyncAudit.objects.create(
        api_key_name=call.client.key_name if call.client else "",
        endpoint=endpoint,
        request_id=call.request_id,
        source_type=columns.get("source_type"),
        source_ref=columns.get("source_ref"),
        note=columns.get("note"),
        actor=columns.get("actor"),
        posted_at=_posted_at_column(columns.get("posted_at")),
        products_received=call.received,
        products_updated=updated,
        unknown_products=unknown,
        stale_products=stale,
        outcome=outcome,
        status_code=status_code,
        duration_ms=round((time.perf_counter() - call.started) * 1000, 3),
        error_summary=error_summary[:4000],
        ignored_fields=list(call.ignored_fields),
    )


def problems_summary(problems: list[Problem]) -> str:
    """A refusal's summary: where and why, for its first problems."""
    return "; ".join(f"{list(p.loc)}: {p.msg}" for p in problems[:20])


def record_refusal(
    call: SyncCall, *, status_code: int, error_summary: str, unknown: int = 0
) -> SyncAudit | None:
    """The audit row of a refused call (a 4xx answer); None when the database would not take it
    (the answer goes out all the same)."""
    try:
        return record(
            call,
            SyncAudit.Outcome.REFUSED,
            status_code=status_code,
            unknown=unknown,
            error_summary=error_summary,
        )
    except DatabaseError:
        logger.exception("could not write the audit row of a refused sync")
        return None
