"""Resolution of pending keys: keys the partner system sent that matched no product, or several.

A pending key resolves itself when a product with that key comes into being (in the admin, by a
catalogue import, or when a later sync names it by EAN); staff can also create products from
pending keys or dismiss them. Matching follows the sync's lookup: a pending key with an EAN
matches exactly (ean, stock_code); one without matches by stock_code when exactly one product
has that stock_code.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
import pydantic
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from catalog.keys import ProductsByKey
from catalog.models import (
    KeptItem,
    PendingProduct,
    Product,
    ProductHistory,
    SyncAudit,
)
from catalog.schemas import TRACKED_FIELDS, ProductItem
from core.bulk import bulk_insert_rows, bulk_update_rows, one_of
from core.locks import lock_names
from stock.levels import levels_set
from stock.models import StockLevel, StockMovement
from stock.movements import Source
from stock.warehouses import item_warehouse_code, warehouses_by_code
from sync.warehouses import PRODUCT_FIELDS

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
    set_in = _apply_kept_levels(product.pk, pending, now=now, skip=skip)
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


def _apply_kept_levels(
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
            _apply_kept_levels(product.pk, pending, now=now)
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


# Up to this many open pending keys are read whole when a sync closes keys.
OPEN_SCAN_LIMIT = 2000
# A sync of at most this many items asks for their open keys by stock code.
FEW_CODES = 100
# Closed keys whose kept items are read at once.
_CLOSED_CHUNK = 2000


def pending_close_for_synced(
    *, applied: int, matched: Callable[[], Sequence[tuple]], now: datetime
) -> int:
    """Close open pending keys that a sync just answered by EAN; returns how many.

    `applied` is how many items the sync applied; `matched()` gives (ean, stock_code, product
    pk[, warehouse]) of those applied with an EAN (`warehouse` as the item named it), and is
    asked only when an open key may be answered (a batch with no open key to close never
    builds its 5000 entries). The sync's own values are newer than anything pending, so the
    payload is not applied: the entry with that exact key, or the one with that stock_code and
    no EAN (unknown or ambiguous before), is closed, in a few statements whatever the batch
    size. Only the levels of warehouses the sync did not name for the product take the items
    the key kept for them (`_apply_kept_levels`, the products locked by the sync); rows without
    their warehouse leave it unknown which the sync named, and then only warehouses where the
    product holds no level at all (which the sync cannot have written) take them.
    """
    if not applied:
        return 0
    open_keys = PendingProduct.objects.filter(state=PendingProduct.State.OPEN)

    def by_code(rows: Sequence[tuple]) -> list[tuple[int, str, str]]:
        # Built only when asked: Django prepares each of thousands of codes as it filters.
        codes = {row[1] for row in rows}
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
    _apply_other_warehouses({row[0]: row[2] for row in closing}, matched_rows, now=now)
    return len(closing)


def _apply_other_warehouses(
    closed: dict[int, int], matched_rows: Sequence[tuple], *, now: datetime
) -> None:
    """The levels of the closed keys' (pk -> product pk) warehouses that the sync did not name
    for their product, from the items the keys kept for them."""
    if not closed:  # nothing to read the batch's rows for
        return
    synced_in: dict[int, set[str]] = defaultdict(set)
    unknown = set()
    for row in matched_rows:
        if len(row) > 3:
            synced_in[row[2]].add(item_warehouse_code(row[3]))
        else:
            unknown.add(row[2])
    wanted = unknown & set(closed.values())
    for product_id, code in StockLevel.objects.filter(product_id__in=wanted).values_list(
        "product_id", "warehouse__code"
    ):
        # Any warehouse with a level may be one the sync just wrote.
        synced_in[product_id].add(code)
    for loaded in _keys_kept_elsewhere(sorted(closed), closed, synced_in):
        for pending in PendingProduct.objects.filter(pk__in=loaded).order_by("pk"):
            product_pk = closed[pending.pk]
            _apply_kept_levels(product_pk, pending, now=now, skip=synced_in[product_pk])


def _keys_kept_elsewhere(
    pks: list[int], closed: dict[int, int], synced_in: dict[int, set[str]]
) -> Iterable[list[int]]:
    """The closed keys (in chunks) that kept an item for a warehouse the sync did not name for
    their product: only those are loaded whole."""
    synced = {frozenset(synced_in[product_pk]) for product_pk in closed.values()}
    if connection.vendor == "postgresql" and len(synced) == 1 and len(only := synced.pop()) == 1:
        # Every product was synced in one warehouse (a connector's usual batch): the database
        # picks the keys that kept an item for another one, without sending every key's codes.
        (code,) = only
        yield _kept_elsewhere(pks, code)
        return
    for start in range(0, len(pks), _CLOSED_CHUNK):
        # Which warehouses each key kept an item for, read without the items: a key kept from
        # before the warehouses holds its payload alone, for the warehouse the payload names.
        kept_in = (
            PendingProduct.objects.filter(pk__in=pks[start : start + _CLOSED_CHUNK])
            .annotate(
                payload_warehouse=KeyTextTransform("warehouse", "payload"),
                kept=_kept_codes(),
            )
            .values_list("pk", "kept", "payload_warehouse")
        )
        yield [
            pk
            for pk, kept, named in kept_in
            if not set(_codes(kept) or [item_warehouse_code(named)]) <= synced_in[closed[pk]]
        ]


def _kept_elsewhere(pks: list[int], code: str) -> list[int]:
    """Which of these keys kept an item for a warehouse other than `code` (PostgreSQL): a key
    kept from before the warehouses holds its payload alone, for the warehouse the payload
    names (`_codes` and `item_warehouse_code`, in SQL). The ids travel as one parameter."""
    q = connection.ops.quote_name
    items = q(PendingProduct._meta.get_field("warehouse_items").column)
    payload = q(PendingProduct._meta.get_field("payload").column)
    chosen, values = one_of("id", pks)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {q(PendingProduct._meta.db_table)} WHERE {chosen} AND "
            f"CASE WHEN jsonb_typeof({items}) = 'object' AND {items} <> '{{}}'::jsonb "
            f"THEN ({items} - %s) <> '{{}}'::jsonb "
            f"ELSE COALESCE(NULLIF({payload} ->> 'warehouse', ''), %s) <> %s END",
            [*values, code, settings.DEFAULT_WAREHOUSE, code],
        )
        return [pk for (pk,) in cursor.fetchall()]


def _kept_codes() -> RawSQL:
    """The codes a key's `warehouse_items` holds items for (its keys), read by the database:
    a list on PostgreSQL, a JSON array's text on SQLite (`_codes` reads either)."""
    column = connection.ops.quote_name(PendingProduct._meta.get_field("warehouse_items").column)
    if connection.vendor == "postgresql":
        return RawSQL(
            f"CASE WHEN jsonb_typeof({column}) = 'object' "
            f"THEN ARRAY(SELECT jsonb_object_keys({column})) END",
            [],
        )
    return RawSQL(f"(SELECT json_group_array(key) FROM json_each({column}))", [])


def _codes(kept: list[str] | str | None) -> list[str]:
    if isinstance(kept, str):
        kept = json.loads(kept)
    return [str(code) for code in kept or ()]


_PENDING_FIELDS = (
    "ean",
    "stock_code",
    "reason",
    "state",
    "payload",
    "posted_at",
    "warehouse_items",
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
# Each warehouse's item by the same rule, item by item: the kept one stays only when both hold
# a time and its is later (times kept as `document_time_text`, which compares as text). The
# kept items of the warehouses the call did not name stay as they are.
_PENDING_ITEMS = (
    "(SELECT {merge}(k, v) FROM ("
    "SELECT o.key AS k, CASE WHEN n.key IS NULL OR {old_time} > {new_time} "
    "THEN o.value ELSE n.value END AS v "
    "FROM {each}({{table}}.warehouse_items) AS o "
    "LEFT JOIN {each}(excluded.warehouse_items) AS n ON n.key = o.key "
    "UNION ALL SELECT n.key, n.value FROM {each}(excluded.warehouse_items) AS n "
    "WHERE n.key NOT IN (SELECT o.key FROM {each}({{table}}.warehouse_items) AS o)"
    ") AS kept)"
)
_PENDING_ITEMS_SQL = {
    # Where no kept item is later than the call's item for its warehouse (always, for a call
    # without a document time), the call's items replace theirs: PostgreSQL's `||` does it
    # without taking both sides apart.
    "postgresql": "CASE WHEN excluded.posted_at IS NULL OR NOT EXISTS (SELECT 1 FROM "
    "jsonb_each({table}.warehouse_items) AS o WHERE (o.value ->> 'posted_at') > "
    "(excluded.warehouse_items -> o.key ->> 'posted_at')) "
    "THEN {table}.warehouse_items || excluded.warehouse_items ELSE "
    + _PENDING_ITEMS.format(
        merge="jsonb_object_agg",
        each="jsonb_each",
        old_time="(o.value ->> 'posted_at')",
        new_time="(n.value ->> 'posted_at')",
    )
    + " END",
    # json(): the value is an object, not a text to quote.
    "sqlite": _PENDING_ITEMS.format(
        merge="json_group_object",
        each="json_each",
        old_time="json_extract(o.value, '$.posted_at')",
        new_time="json_extract(n.value, '$.posted_at')",
    ).replace("SELECT json_group_object(k, v)", "SELECT json_group_object(k, json(v))"),
}
_PENDING_UPSERT = (
    "ON CONFLICT (ean, stock_code) DO UPDATE SET "
    "reason = excluded.reason, state = excluded.state, "
    f"payload = CASE WHEN {_PENDING_NEWER} THEN excluded.payload ELSE {{table}}.payload END, "
    f"posted_at = CASE WHEN {_PENDING_NEWER} "
    "THEN COALESCE(excluded.posted_at, {table}.posted_at) ELSE {table}.posted_at END, "
    "warehouse_items = {items}, "
    "last_seen = excluded.last_seen, times_seen = {table}.times_seen + 1, "
    "last_request_id = excluded.last_request_id, resolved_at = NULL, resolved_by = ''"
)
# Where two items of one call for a key differ, the first one's: its warehouse and quantity.
_LEVEL_FIELDS = frozenset({"shop_quantity", "warehouse"})
# What a key keeps of each warehouse's item: the fields every item carries (its key, its level
# and the values an item must have), its EAN and its warehouse. Resolving the key applies its
# level to the warehouse; prices, status and catalogue values are the key's `payload`'s. The
# whole item would double every pending row a batch writes.
_KEPT_FIELDS = (
    *(name for name, field in ProductItem.model_fields.items() if field.is_required()),
    "ean",
    "warehouse",
)


def pending_record(
    unresolved: Sequence[tuple[Any, str]], *, request_id: str | None, now, posted_at=None
) -> None:
    """Record each key a sync could not resolve as an open pending key (a key seen before is
    counted again), one row per key in key order, to lock consistently, in one statement.

    The key keeps its newest item (`payload`: its prices, status and catalogue values are the
    product's) and the last item sent for each warehouse (`warehouse_items`, by the item's
    warehouse code, the default warehouse's when it names none): an item replaces its
    warehouse's unless that one holds a later document time; one sent without a time replaces.
    A call may name one key once per warehouse (`unresolved`: each item, as validated by the
    sync, and why it is pending)."""
    if not unresolved:
        return
    by_key: dict[tuple[str, str], list[tuple[Any, str]]] = defaultdict(list)
    for item, reason in unresolved:
        by_key[item.key].append((item, reason))
    rows = []
    # What each kept item holds besides its level: the same for every item of the call.
    kept = KeptItem("", {}, posted_at=posted_at, request_id=request_id, seen_at=now).stored()
    for (ean, stock_code), pairs in sorted(by_key.items()):
        items = [(item, item.payload()) for item, _ in pairs]
        rows.append(
            (
                ean,
                stock_code,
                pairs[0][1],
                PendingProduct.State.OPEN,
                _json_text(_key_payload([payload for _, payload in items])),
                posted_at,
                _json_text(_kept_items(items, kept)),
                now,
                now,
                1,
                request_id,
                None,
                "",
            )
        )
    upsert = _PENDING_UPSERT.replace("{items}", _PENDING_ITEMS_SQL[connection.vendor])
    bulk_insert_rows(PendingProduct, _PENDING_FIELDS, rows, on_conflict=upsert)


def _key_payload(payloads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The item a key keeps as its newest: the call's first item for it, with the values only a
    later one of its items carries (where two carry one they agree: the sync refuses
    conflicting values)."""
    if len(payloads) == 1:
        return payloads[0]
    payload = dict(payloads[0])
    for later in payloads[1:]:
        for name, value in later.items():
            if name not in _LEVEL_FIELDS:
                payload.setdefault(name, value)
    return payload


def _kept_items(
    items: Sequence[tuple[Any, dict[str, Any]]], stored: dict[str, Any]
) -> dict[str, Any]:
    """The call's item (its key and level) for each warehouse, as
    `PendingProduct.warehouse_items` keeps them (`stored`: a `KeptItem.stored()` of the call,
    its time, request and when seen, which each item's level completes)."""
    kept = {}
    for item, payload in items:
        code = item_warehouse_code(getattr(item, "warehouse", None))
        level = {name: payload[name] for name in _KEPT_FIELDS if name in payload}
        kept[code] = {**stored, "payload": level}
    return kept


def _json_text(value: Any) -> str:
    """JSON text of plain data (an item's payload): orjson's, ten times as fast as json's for
    the hundreds of keys a batch may leave pending; json's for what orjson refuses (an integer
    beyond 64 bits)."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False)
