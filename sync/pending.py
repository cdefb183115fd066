"""Resolution of pending keys: keys the partner system sent that matched no product, or several.

A pending key resolves itself when a product with that key comes into being (in the admin, by a
catalogue import, or when a later sync names it by EAN); staff can also create products from
pending keys or dismiss them. Matching follows the sync's lookup: a pending key with an EAN
matches exactly (ean, stock_code); one without matches by stock_code when exactly one product
has that stock_code.

What a sync itself does with pending keys (records them, closes those it answered) is
`sync.pending_sync`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from catalog.keys import ProductsByKey
from catalog.models import KeptItem, PendingProduct, Product, ProductHistory, SyncAudit
from catalog.schemas import TRACKED_FIELDS, ProductItem
from core.locks import lock_names
from stock.levels import levels_set
from stock.models import StockLevel, StockMovement
from stock.movements import Source
from stock.warehouses import warehouses_by_code
from sync.warehouses import PRODUCT_FIELDS

HISTORY_SOURCE = "pending"
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


def _source_audit_id(pending: PendingProduct, kept: KeptItem | None = None) -> int | None:
    """The audit of the call that last sent this key (or, given `kept`, that sent that item).

    The sync writes the pending row and its audit in one transaction a moment apart, so the
    first audit of that request_id from the time it was seen on that counted unknown keys is
    that call.
    """
    request_id, seen = pending.last_request_id, pending.last_seen
    if kept is not None and kept.seen_at is not None:
        request_id, seen = kept.request_id, kept.seen_at
    return (
        SyncAudit.objects.filter(
            request_id=request_id,
            created_at__gte=seen,
            unknown_products__gt=0,
        )
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
        .first()
    )


def _payload_values(pending: PendingProduct) -> ProductItem | None:
    return _item_of(pending.payload)


def _item_of(payload: Any) -> ProductItem | None:
    try:
        return ProductItem.model_validate(payload)
    except pydantic.ValidationError:
        return None


@dataclass(frozen=True)
class FileGave:
    """What a catalogue file set for one product: the warehouses it gave a level for (by code)
    and the product fields it carried a value for."""

    warehouses: frozenset[str]
    fields: frozenset[str]


@dataclass
class PendingApplied:
    """What resolving pending keys did: how many keys closed, and which of the products'
    levels (product pk, warehouse code) and fields (product pk, field) took a key's value."""

    resolved: int = 0
    levels: set[tuple[int, str]] = field(default_factory=set)
    fields: set[tuple[int, str]] = field(default_factory=set)


def pending_resolve_for_products(*, products: Iterable[Product], by: str) -> int:
    """Close the open pending keys that these products now answer; returns how many closed.

    Unless a change newer than the entry's last sighting has already been applied to its
    product, the entry's newest prices, status and catalogue values are applied to the
    product, and its last item for each warehouse to that warehouse's level (`_apply_pending`);
    each change is kept as product history with source "pending" (the levels' as movements
    with reason `pending_key_resolved`), linked to the audit of the call that sent it.
    """
    return _resolve(products, by=by).resolved


def pending_resolve_for_import(
    *, products: Iterable[Product], gave: Mapping[tuple[str, str], FileGave], by: str
) -> PendingApplied:
    """Close the open pending keys that these products (just imported) now answer, as
    `pending_resolve_for_products` does, except that what the file set stands: for a product
    whose key (ean, stock_code) is in `gave`, a key's items apply only to the warehouses the
    file gave no level for, and its values only to the fields the file left empty (any
    catalogue field the key carries, not only prices and status). Returns what was applied."""
    return _resolve(products, by=by, gave=gave)


def _resolve(
    products: Iterable[Product],
    *,
    by: str,
    gave: Mapping[tuple[str, str], FileGave] | None = None,
) -> PendingApplied:
    applied = PendingApplied()
    products = [p for p in products if p.pk is not None]
    if not products:
        return applied
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
            return applied
        products_by_key = ProductsByKey(product_rows, key=lambda row: (row[1], row[2]))
        matches = []
        for pending in pendings:
            row = products_by_key.match(pending.ean, pending.stock_code)
            if row is not None and row[0] in wanted:
                matches.append((pending, row[0]))
        if not matches:
            return applied
        file_gave = (
            {row[0]: gave[(row[1], row[2])] for row in product_rows if (row[1], row[2]) in gave}
            if gave
            else {}
        )
        _apply_and_close(matches, by=by, gave=file_gave, applied=applied)
        applied.resolved = len(matches)
        return applied


def _apply_and_close(
    matches: Sequence[tuple[PendingProduct, int]],
    *,
    by: str,
    gave: Mapping[int, FileGave],
    applied: PendingApplied,
) -> None:
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
        if latest is None or latest <= pending.last_seen:
            _apply_pending(product, pending, now=now, gave=gave.get(product_pk), applied=applied)
            latest_change[product_pk] = pending.last_seen
        pending.state = PendingProduct.State.RESOLVED
        pending.resolved_product_id = product_pk
        pending.resolved_at = now
        pending.resolved_by = by
    PendingProduct.objects.bulk_update(
        [pending for pending, _ in matches],
        ("state", "resolved_product", "resolved_at", "resolved_by"),
    )


def _apply_pending(
    product: Product,
    pending: PendingProduct,
    *,
    now: datetime,
    gave: FileGave | None = None,
    applied: PendingApplied | None = None,
) -> None:
    """Apply what the key kept to its (locked) product, by the sync's rule for document
    times: the newest item's prices, status and catalogue values unless the product holds a
    later document time, and each warehouse's last item to that warehouse's level unless the
    level holds a later one. Given what a file set (`gave`), only the fields it left empty
    and the warehouses it gave no level for take the key's values."""
    applied = applied if applied is not None else PendingApplied()
    item = _payload_values(pending)
    if item is not None and not _older_document(pending, product):
        names = (
            _CATALOGUE_TRACKED
            if gave is None
            else tuple(name for name in PRODUCT_FIELDS if name not in gave.fields)
        )
        for name in _apply_product_values(product, item, names, pending=pending, now=now):
            applied.fields.add((product.pk, name))
    skip = gave.warehouses if gave is not None else ()
    set_in = apply_kept_levels(product.pk, pending, now=now, skip=skip)
    if set_in:
        applied.levels.update((product.pk, code) for code in set_in)
        product.shop_quantity = Product.objects.values_list("shop_quantity", flat=True).get(
            pk=product.pk
        )


def _older_document(pending: PendingProduct, product: Product) -> bool:
    """The payload comes from a document posted before the one the product already holds."""
    return (
        pending.posted_at is not None
        and product.posted_at is not None
        and product.posted_at > pending.posted_at
    )


def apply_kept_levels(
    product_pk: int, pending: PendingProduct, *, now: datetime, skip: Iterable[str] = ()
) -> list[str]:
    """Set the (locked) product's level in each warehouse the key kept an item for (but those
    in `skip`) to that item's quantity, with its document time, unless the level holds a later
    one; recorded as movements with reason `pending_key_resolved`. An item that no longer
    passes validation, or whose warehouse is gone, is passed over. Returns the codes of the
    warehouses whose level was set."""
    skip = set(skip)
    kept = [k for k in pending.kept_items() if k.warehouse not in skip]
    if not kept:
        return []
    warehouses = warehouses_by_code(k.warehouse for k in kept)
    held_at = dict(
        StockLevel.objects.filter(
            product_id=product_pk, warehouse_id__in=[w.pk for w in warehouses.values()]
        ).values_list("warehouse_id", "posted_at")
    )
    applied = []
    for k in kept:
        warehouse = warehouses.get(k.warehouse)
        item = _item_of(k.payload)
        if warehouse is None or item is None:
            continue
        held = held_at.get(warehouse.pk)
        if k.posted_at is not None and held is not None and held > k.posted_at:
            continue
        levels_set(
            {product_pk: item.shop_quantity},
            source=Source(
                StockMovement.Reason.PENDING_KEY_RESOLVED,
                sync_audit_id=_source_audit_id(pending, k),
                request_id=k.request_id if k.seen_at is not None else pending.last_request_id,
                posted_at=k.posted_at,
            ),
            now=now,
            posted_at=k.posted_at,
            warehouse_id=warehouse.pk,
        )
        applied.append(k.warehouse)
    return applied


def _apply_product_values(
    product: Product,
    item: ProductItem,
    names: Sequence[str],
    *,
    pending: PendingProduct,
    now: datetime,
) -> list[str]:
    """The newest item's values of the fields `names` (those it carries), and its document
    time; the prices' and status's changes kept as history. Returns the fields changed."""
    audit_id = _source_audit_id(pending)
    history = []
    changed = []
    for name in names:
        new = getattr(item, name)
        old = getattr(product, name)
        if new is None or new == old:
            continue
        if name in _CATALOGUE_TRACKED:
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
        changed.append(name)
    # The product now holds this document's state, and so its time.
    dated = pending.posted_at is not None and product.posted_at != pending.posted_at
    if dated:
        product.posted_at = pending.posted_at
    if changed or dated:
        product.updated_at = now
        product.save(update_fields=(*changed, "posted_at", "updated_at"))
    ProductHistory.objects.bulk_create(history)
    return changed


_CATALOGUE_TRACKED = tuple(name for name in TRACKED_FIELDS if name != "shop_quantity")


def pending_create_products(*, pending_ids: Iterable[int], by: str) -> PendingCreateResult:
    """Create a product from each selected open pending key, and close the key: its values
    and document time are the newest item's, its level in each warehouse the last item sent
    for that warehouse.

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
        to_create: list[tuple[PendingProduct, Product]] = []
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
            values.pop("shop_quantity")
            product = Product(
                ean=pending.ean,
                stock_code=pending.stock_code,
                posted_at=pending.posted_at,
                **values,
            )
            to_create.append((pending, product))
        if existing:
            pending_resolve_for_products(products=existing, by=by)
        now = timezone.now()
        for pending, product in to_create:
            product.save(force_insert=True)
            apply_kept_levels(product.pk, pending, now=now)
            product.shop_quantity = Product.objects.values_list("shop_quantity", flat=True).get(
                pk=product.pk
            )
            pending.state = PendingProduct.State.RESOLVED
            pending.resolved_product = product
            pending.resolved_at = now
            pending.resolved_by = by
            result.created.append(product)
        PendingProduct.objects.bulk_update(
            [pending for pending, _ in to_create],
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
