"""Housekeeping of the catalogue's records: purging old audits, exporting pending keys."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TextIO

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from catalog.models import IdempotencyRecord, PendingProduct, ProductHistory, SyncAudit
from catalog.schemas import VALUE_FIELDS
from core.files import spreadsheet_text

# Audits go in batches: each batch is one short transaction, so a purge of months of audits
# neither holds locks for long nor loads every row at once.
PURGE_BATCH_SIZE = 2000


@dataclass(frozen=True)
class PurgeResult:
    cutoff: datetime
    audits: int
    history: int
    idempotency_records: int
    dry_run: bool = False
    # Resolved and dismissed pending keys (open ones are never purged).
    pending_keys: int = 0


def sync_audits_purge(
    *, older_than_days: int, now: datetime | None = None, dry_run: bool = False
) -> PurgeResult:
    """Delete sync audits older than `older_than_days`, the history rows they left, the
    idempotency records past the retention window (their retries are applied afresh anyway),
    and the pending keys closed (resolved or dismissed) and last seen before that age."""
    if older_than_days < 1:
        raise ValueError("older_than_days must be at least 1.")
    now = now or timezone.now()
    cutoff = now - timedelta(days=older_than_days)
    expired_before = now - timedelta(hours=settings.IDEMPOTENCY_RETENTION_HOURS)
    old_audits = SyncAudit.objects.filter(created_at__lt=cutoff)
    expired_records = IdempotencyRecord.objects.filter(created_at__lt=expired_before)
    closed_keys = PendingProduct.objects.filter(
        Q(resolved_at__lt=cutoff) | Q(resolved_at__isnull=True),
        state__in=(PendingProduct.State.RESOLVED, PendingProduct.State.DISMISSED),
        last_seen__lt=cutoff,
    )
    if dry_run:
        return PurgeResult(
            cutoff=cutoff,
            audits=old_audits.count(),
            history=ProductHistory.objects.filter(audit__created_at__lt=cutoff).count(),
            idempotency_records=expired_records.count(),
            dry_run=True,
            pending_keys=closed_keys.count(),
        )

    audits = history = 0
    while True:
        with transaction.atomic():
            ids = list(old_audits.order_by("pk").values_list("pk", flat=True)[:PURGE_BATCH_SIZE])
            if not ids:
                break
            history += ProductHistory.objects.filter(audit_id__in=ids).delete()[0]
            _, deleted = SyncAudit.objects.filter(pk__in=ids).delete()
            audits += deleted.get(SyncAudit._meta.label, 0)
    with transaction.atomic():
        records = expired_records.delete()[0]
    with transaction.atomic():
        pending_keys = closed_keys.delete()[0]
    return PurgeResult(
        cutoff=cutoff,
        audits=audits,
        history=history,
        idempotency_records=records,
        pending_keys=pending_keys,
    )


# What the export says about each key besides its values.
_PENDING_FACTS = ("reason", "state", "times_seen", "first_seen", "last_seen", "last_request_id")
PENDING_COLUMNS = ("stock_code", "ean", "warehouse", *VALUE_FIELDS, *_PENDING_FACTS)


def pending_export_csv(
    *, stream: TextIO, states: Iterable[str] = (PendingProduct.State.OPEN,)
) -> int:
    """Write the pending keys in `states` as CSV, one row per key and warehouse; returns how
    many keys were written.

    The item columns carry, under the API's field names, the warehouse's code and the last
    quantity sent for it, and the newest prices, status and catalogue values sent for the key
    (the same on each of its rows, as `import_products` requires of one product's records), so
    staff can complete the file and load it with `import_products` to create the products.
    """
    writer = csv.writer(stream)
    writer.writerow(PENDING_COLUMNS)
    pending = (
        PendingProduct.objects.filter(state__in=list(states))
        .order_by("stock_code", "ean")
        .only("stock_code", "ean", "payload", "posted_at", "warehouse_items", *_PENDING_FACTS)
    )
    count = 0
    for key in pending.iterator(chunk_size=2000):
        payload = key.payload if isinstance(key.payload, dict) else {}
        levels = [(k.warehouse, k.payload.get("shop_quantity")) for k in key.kept_items()]
        facts = [
            key.reason,
            key.state,
            key.times_seen,
            key.first_seen.isoformat(),
            key.last_seen.isoformat(),
            key.last_request_id or "",
        ]
        for warehouse, quantity in levels:
            values = [
                _cell(quantity if name == "shop_quantity" else payload.get(name))
                for name in VALUE_FIELDS
            ]
            row = [key.stock_code, key.ean, _cell(warehouse), *values, *facts]
            # Staff open this file in a spreadsheet: no cell may run as a formula.
            writer.writerow(
                [spreadsheet_text(cell) if isinstance(cell, str) else cell for cell in row]
            )
        count += 1
    return count


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
