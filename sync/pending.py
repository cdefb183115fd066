"""Resolution of pending keys: keys the partner system sent that matched no product, or several.

A pending key resolves itself when a product with that key comes into being (in the admin, by a
catalogue import, or when a later sync names it by EAN); staff can also create products from
pending keys or dismiss them. Matching follows the sync's lookup: a pending key with an EAN
matches exactly (ean, stock_code); one without matches by stock_code when exactly one product
has that stock_code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pydantic
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit
from catalog.schemas import TRACKED_FIELDS, ProductItem
from core.bulk import bulk_insert_rows, bulk_update_rows
from core.locks import lock_names
from stock.models import StockMovement
from stock.services import Source, levels_set

HISTORY_SOURCE = "pending"
SYNC_RESOLVER = "sync"
# The lock space of stock codes (core.locks): a sync that records pending keys holds its unknown
# codes shared, a resolution that may close them holds its codes exclusively.
STOCK_CODE_LOCKS = 1


def lock_stock_codes(codes: Iterable[str], *, shared: bool = False) -> None:
    """Hold these stock codes until the transaction ends (decisions: Concurrent writers).

    A sync takes its unknown codes (shared) before it looks for their products a second time
    and keeps them while it records the keys as pending; a resolution takes its codes
    (exclusively) before it reads the open keys. So either the sync's second look sees the
    product, or the resolution sees the sync's pending keys: never an open key for a product
    that exists.
    """
    lock_names(STOCK_CODE_LOCKS, codes, shared=shared)


@dataclass
class PendingCreateResult:
    """What `pending_create_products` did, and why it skipped the keys it skipped."""

    created: list[Product] = field(default_factory=list)
    resolved: int = 0
    skipped: list[str] = field(default_factory=list)


def _source_audit_id(pending: PendingProduct) -> int | None:
    """The audit of the call that last sent this key.

    The sync writes the pending row and its audit in one transaction a moment apart, so the
    first audit of that request_id from `last_seen` on that counted unknown keys is that call.
    """
    return (
        SyncAudit.objects.filter(
            request_id=pending.last_request_id,
            created_at__gte=pending.last_seen,
            unknown_products__gt=0,
        )
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
        .first()
    )


def _payload_values(pending: PendingProduct) -> ProductItem | None:
    try:
        return ProductItem.model_validate(pending.payload)
    except pydantic.ValidationError:
        return None


def pending_resolve_for_products(*, products: Iterable[Product], by: str) -> int:
    """Close the open pending keys that these products now answer; returns how many closed.

    The pending entry's last quantity, prices and status are applied to its product unless a
    change newer than the entry's last sighting has already been applied to that product; each
    change is kept as product history with source "pending", linked to the audit of the call
    that sent it.
    """
    products = [p for p in products if p.pk is not None]
    if not products:
        return 0
    wanted = {p.pk for p in products}
    codes = {p.stock_code for p in products}
    with transaction.atomic():
        # Products first, then pending keys, each in primary-key order: the order a sync takes
        # its locks in, so that a sync and a resolution queue instead of deadlocking.
        product_rows = list(
            Product.objects.select_for_update()
            .filter(stock_code__in=codes)
            .order_by("pk")
            .values_list("pk", "ean", "stock_code")
        )
        # After the product rows (the sync's order: rows, then codes), before the open keys.
        lock_stock_codes(codes)
        pendings = list(
            PendingProduct.objects.select_for_update()
            .filter(state=PendingProduct.State.OPEN, stock_code__in=codes)
            .order_by("pk")
        )
        if not pendings:
            return 0
        products_by_key = ProductsByKey(product_rows, key=lambda row: (row[1], row[2]))
        matches = []
        for pending in pendings:
            row = products_by_key.match(pending.ean, pending.stock_code)
            if row is not None and row[0] in wanted:
                matches.append((pending, row[0]))
        if not matches:
            return 0
        _apply_and_close(matches, by=by)
        return len(matches)


def _apply_and_close(matches: Sequence[tuple[PendingProduct, int]], *, by: str) -> None:
    now = timezone.now()
    product_pks = {pk for _, pk in matches}
    latest_change: dict[int, datetime] = dict(
        ProductHistory.objects.filter(product_id__in=product_pks)
        .values("product_id")
        .annotate(latest=Max("changed_at"))
        .values_list("product_id", "latest")
    )
    products = Product.objects.select_for_update().in_bulk(product_pks)
    # The newest sighting wins when two pending keys (with and without EAN) name one product.
    for pending, product_pk in sorted(matches, key=lambda pair: pair[0].last_seen):
        product = products[product_pk]
        latest = latest_change.get(product_pk)
        item = _payload_values(pending)
        if (
            item is not None
            and (latest is None or latest <= pending.last_seen)
            and not _older_document(pending, product)
        ):
            _apply_payload(product, item, pending=pending, now=now)
            latest_change[product_pk] = pending.last_seen
        pending.state = PendingProduct.State.RESOLVED
        pending.resolved_product_id = product_pk
        pending.resolved_at = now
        pending.resolved_by = by
    PendingProduct.objects.bulk_update(
        [pending for pending, _ in matches],
        ("state", "resolved_product", "resolved_at", "resolved_by"),
    )


def _older_document(pending: PendingProduct, product: Product) -> bool:
    """The payload comes from a document posted before the one the product already holds."""
    return (
        pending.posted_at is not None
        and product.posted_at is not None
        and product.posted_at > pending.posted_at
    )


def _apply_payload(
    product: Product, item: ProductItem, *, pending: PendingProduct, now: datetime
) -> None:
    audit_id = _source_audit_id(pending)
    history = []
    for name in _CATALOGUE_TRACKED:
        new = getattr(item, name)
        old = getattr(product, name)
        if new is None or new == old:
            continue
        history.append(
            ProductHistory(
                product=product,
                audit_id=audit_id,
                field=name,
                old_value=ProductHistory.value_text(old),
                new_value=ProductHistory.value_text(new),
                changed_at=now,
                source=HISTORY_SOURCE,
                posted_at=pending.posted_at,
            )
        )
        setattr(product, name, new)
    # The product now holds this document's state, and so its time.
    dated = pending.posted_at is not None and product.posted_at != pending.posted_at
    if dated:
        product.posted_at = pending.posted_at
    if history or dated:
        product.updated_at = now
        product.save(update_fields=(*_CATALOGUE_TRACKED, "posted_at", "updated_at"))
    ProductHistory.objects.bulk_create(history)
    # The level (and the product's figure) is the stock app's to write and record.
    levels_set(
        {product.pk: item.shop_quantity},
        source=_pending_source(pending, audit_id),
        now=now,
        posted_at=pending.posted_at,
    )
    product.shop_quantity = Product.objects.values_list("shop_quantity", flat=True).get(
        pk=product.pk
    )


_CATALOGUE_TRACKED = tuple(name for name in TRACKED_FIELDS if name != "shop_quantity")


def _pending_source(pending: PendingProduct, audit_id: int | None) -> Source:
    return Source(
        StockMovement.Reason.PENDING_KEY_RESOLVED,
        sync_audit_id=audit_id,
        request_id=pending.last_request_id,
        posted_at=pending.posted_at,
    )


def pending_create_products(*, pending_ids: Iterable[int], by: str) -> PendingCreateResult:
    """Create a product from each selected open pending key's last payload, and close the key.

    Ambiguous keys are skipped (a product without EAN would only add to the ambiguity), as are
    keys whose product already exists (they are resolved instead) and payloads that no longer
    pass validation.
    """
    result = PendingCreateResult()
    with transaction.atomic():
        pendings = list(
            PendingProduct.objects.select_for_update()
            .filter(pk__in=list(pending_ids), state=PendingProduct.State.OPEN)
            .order_by("pk")
        )
        to_create: list[tuple[PendingProduct, Product, int]] = []
        existing: list[Product] = []
        for pending in pendings:
            if pending.reason == PendingProduct.Reason.AMBIGUOUS:
                result.skipped.append(
                    f"{pending}: the key is ambiguous; it needs an EAN to name one product."
                )
                continue
            item = _payload_values(pending)
            if item is None:
                result.skipped.append(f"{pending}: its last payload is not a valid product.")
                continue
            found = _products_for_key(pending.ean, pending.stock_code)
            if len(found) > 1:
                result.skipped.append(
                    f"{pending}: several products have this stock_code now; it needs an EAN."
                )
                continue
            if found:
                existing.extend(found)
                result.resolved += 1
                continue
            values = item.values()
            quantity = values.pop("shop_quantity")
            product = Product(ean=pending.ean, stock_code=pending.stock_code, **values)
            to_create.append((pending, product, quantity))
        if existing:
            pending_resolve_for_products(products=existing, by=by)
        now = timezone.now()
        for pending, product, quantity in to_create:
            product.save(force_insert=True)
            levels_set(
                {product.pk: quantity},
                source=_pending_source(pending, _source_audit_id(pending)),
                now=now,
                posted_at=pending.posted_at,
            )
            product.shop_quantity = quantity
            pending.state = PendingProduct.State.RESOLVED
            pending.resolved_product = product
            pending.resolved_at = now
            pending.resolved_by = by
            result.created.append(product)
        PendingProduct.objects.bulk_update(
            [pending for pending, _, _ in to_create],
            ("state", "resolved_product", "resolved_at", "resolved_by"),
        )
        # A product without EAN may also answer other open keys with its stock_code.
        if result.created:
            pending_resolve_for_products(products=result.created, by=by)
    return result


def _products_for_key(ean: str, stock_code: str) -> list[Product]:
    products = Product.objects.filter(stock_code=stock_code)
    return ProductsByKey(products, key=lambda p: (p.ean, p.stock_code)).candidates(ean, stock_code)


def pending_dismiss(*, pending_ids: Iterable[int], by: str) -> int:
    """Close the selected open pending keys without creating anything; returns how many."""
    with transaction.atomic():
        return PendingProduct.objects.filter(
            pk__in=list(pending_ids), state=PendingProduct.State.OPEN
        ).update(state=PendingProduct.State.DISMISSED, resolved_at=timezone.now(), resolved_by=by)


def pending_rematch_all(*, by: str) -> int:
    """Resolve every open pending key that a product now answers; returns how many."""
    codes = PendingProduct.objects.filter(state=PendingProduct.State.OPEN).values("stock_code")
    products = Product.objects.filter(stock_code__in=codes).only("pk", "stock_code")
    return pending_resolve_for_products(products=products, by=by)


# Up to this many open pending keys are read whole when a sync closes keys.
OPEN_SCAN_LIMIT = 2000
# A sync of at most this many items asks for their open keys by stock code.
FEW_CODES = 100


def pending_close_for_synced(
    *, applied: int, matched: Callable[[], Sequence[tuple[str, str, int]]], now: datetime
) -> int:
    """Close open pending keys that a sync just answered by EAN; returns how many.

    `applied` is how many items the sync applied; `matched()` gives (ean, stock_code, product
    pk) of those applied with an EAN, and is asked only when an open key may be answered (a
    batch with no open key to close never builds its 5000 entries). The sync's own values are
    newer than anything pending, so no payload is applied: the entry with that exact key, or the
    one with that stock_code and no EAN (unknown or ambiguous before), is simply closed, in a
    few statements whatever the batch size.
    """
    if not applied:
        return 0
    open_keys = PendingProduct.objects.filter(state=PendingProduct.State.OPEN)

    def by_code(rows: Sequence[tuple[str, str, int]]) -> list[tuple[int, str, str]]:
        # Built only when asked: Django prepares each of thousands of codes as it filters.
        codes = {code for _, code, _ in rows}
        return list(open_keys.filter(stock_code__in=codes).values_list("pk", "ean", "stock_code"))

    if applied <= FEW_CODES:
        # A single item or a small batch: the stock_code index answers at once, however many
        # keys are open.
        matched_rows = matched()
        candidates = by_code(matched_rows) if matched_rows else []
    else:
        # Open keys are few where staff resolve them: reading them all is cheaper than sending
        # every stock code of a 5000-item batch as a query parameter. Many: ask by stock code.
        candidates = list(open_keys.values_list("pk", "ean", "stock_code")[: OPEN_SCAN_LIMIT + 1])
        matched_rows = matched() if candidates else []
        if len(candidates) > OPEN_SCAN_LIMIT and matched_rows:
            candidates = by_code(matched_rows)
    if not candidates or not matched_rows:
        return 0
    synced = ProductsByKey(matched_rows, key=lambda row: (row[0], row[1]))
    closing = []
    for pending_pk, ean, stock_code in candidates:
        # Without an EAN the key was unknown or ambiguous; a product synced by EAN answers it.
        found = synced.candidates(ean, stock_code)
        if not found:
            continue
        product_pk = found[-1][2]
        closing.append((pending_pk, PendingProduct.State.RESOLVED, product_pk, now, SYNC_RESOLVER))
    # Set-based (one UPDATE ... FROM on PostgreSQL): Django's bulk_update writes a CASE per
    # row, which took 7-8 s for 5000 keys while the batch held its row locks.
    closing.sort()
    bulk_update_rows(
        PendingProduct, ("state", "resolved_product", "resolved_at", "resolved_by"), closing
    )
    return len(closing)


_PENDING_FIELDS = (
    "ean",
    "stock_code",
    "reason",
    "state",
    "payload",
    "posted_at",
    "first_seen",
    "last_seen",
    "times_seen",
    "last_request_id",
    "resolved_at",
    "resolved_by",
)
# The payload sent with the latest document time stays; one sent without a time counts as the
# newest, and a key that holds no time takes any payload (as a product's posted_at does).
_PENDING_NEWER = (
    "(excluded.posted_at IS NULL OR {table}.posted_at IS NULL "
    "OR excluded.posted_at >= {table}.posted_at)"
)
_PENDING_UPSERT = (
    "ON CONFLICT (ean, stock_code) DO UPDATE SET "
    "reason = excluded.reason, state = excluded.state, "
    f"payload = CASE WHEN {_PENDING_NEWER} THEN excluded.payload ELSE {{table}}.payload END, "
    f"posted_at = CASE WHEN {_PENDING_NEWER} "
    "THEN COALESCE(excluded.posted_at, {table}.posted_at) ELSE {table}.posted_at END, "
    "last_seen = excluded.last_seen, times_seen = {table}.times_seen + 1, "
    "last_request_id = excluded.last_request_id, resolved_at = NULL, resolved_by = ''"
)


def pending_record(
    unresolved: Sequence[tuple[ProductItem, str]], *, request_id: str | None, now, posted_at=None
) -> None:
    """Record each key a sync could not resolve as an open pending key (a key seen before is
    counted again, its newest payload kept), in key order, to lock consistently."""
    rows = [
        (
            item.ean or "",
            item.stock_code,
            reason,
            PendingProduct.State.OPEN,
            json.dumps(item.payload(), ensure_ascii=False),
            posted_at,
            now,
            now,
            1,
            request_id,
            None,
            "",
        )
        for item, reason in sorted(unresolved, key=lambda pair: pair[0].key)
    ]
    bulk_insert_rows(PendingProduct, _PENDING_FIELDS, rows, on_conflict=_PENDING_UPSERT)
