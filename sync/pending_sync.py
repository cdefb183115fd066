"""What a sync does with pending keys: it records each key it could not resolve
(`pending_record`, one statement whatever the batch) and closes the open keys it answered by
EAN (`pending_close_for_synced`), whose items kept for other warehouses then apply to those
levels (`sync.pending.apply_kept_levels`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import connection
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform

from catalog.keys import ProductsByKey
from catalog.models import KeptItem, PendingProduct
from catalog.schemas import ProductItem
from core.bulk import bulk_insert_rows, bulk_update_rows, one_of
from stock.models import StockLevel
from stock.warehouses import item_warehouse_code
from sync.pending import apply_kept_levels

# Who closed a key a sync answered (`resolved_by`).
SYNC_RESOLVER = "sync"
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
    the key kept for them (`apply_kept_levels`, the products locked by the sync); rows without
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
            apply_kept_levels(product_pk, pending, now=now, skip=synced_in[product_pk])


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
    unresolved: Sequence[tuple[Any, str]],
    *,
    request_id: str | None,
    now,
    posted_at=None,
    warehouse: str | None = None,
) -> None:
    """Record each key a sync could not resolve as an open pending key (a key seen before is
    counted again), one row per key in key order, to lock consistently, in one statement.

    The key keeps its newest item (`payload`: its prices, status and catalogue values are the
    product's) and the last item sent for each warehouse (`warehouse_items`, by the item's
    warehouse code, the default warehouse's when it names none): an item replaces its
    warehouse's unless that one holds a later document time; one sent without a time replaces.
    A call may name one key once per warehouse (`unresolved`: each item, as validated by the
    sync, and why it is pending). `warehouse`: the code an item that names none is for (a full
    snapshot's; the default warehouse's when None)."""
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
                _json_text(_kept_items(items, kept, warehouse)),
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
    items: Sequence[tuple[Any, dict[str, Any]]], stored: dict[str, Any], warehouse: str | None
) -> dict[str, Any]:
    """The call's item (its key and level) for each warehouse, as
    `PendingProduct.warehouse_items` keeps them (`stored`: a `KeptItem.stored()` of the call,
    its time, request and when seen, which each item's level completes)."""
    kept = {}
    for item, payload in items:
        code = item_warehouse_code(getattr(item, "warehouse", None) or warehouse)
        level = {name: payload[name] for name in _KEPT_FIELDS if name in payload}
        if warehouse is not None and not payload.get("warehouse"):
            level["warehouse"] = warehouse
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
