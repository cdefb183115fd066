"""The request rules of a sync checked before anything is read: the members a body may carry
(a near miss of a field is refused, any other unknown member ignored), the item limit and
repeated keys (the import checks repeated keys too), unknown warehouses, and the problem of a
single item's unresolved key."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Any

from django.conf import settings

from catalog.models import PendingProduct
from catalog.schemas import ProductItem, SyncContext

# The connector needs only the standard library and never imports the service, so the one rule
# of a misspelt field name lives on its side.
from connector.csvfile import near_miss
from core.problems import Problem
from stock.models import Warehouse
from sync.rows import item_ean, item_stock_code

# The members the service reads: an item's (the interface's fields, and `warehouse`), a batch
# body's, a single item's body's, a sync_context's.
ITEM_MEMBERS = tuple(ProductItem.model_fields)
BATCH_MEMBERS = ("products", "request_id", "sync_context")
SINGLE_MEMBERS = (*ITEM_MEMBERS, "request_id", "sync_context")
CONTEXT_MEMBERS = tuple(SyncContext.model_fields)
# A top-level `dry_run` has a problem of its own (a query parameter sent in the body).
DRY_RUN_MEMBER = "dry_run"


def member_problems(
    data: Any, *, single: bool, items: bool = True
) -> tuple[list[Problem], list[str]]:
    """The members of a sync body (`data`, parsed JSON) that the service does not read: a
    problem (`unknown_field`) for each that narrowly misses a member it reads (`near_miss`:
    `warehose`, `Shop Quantity`), in an item or at the top level, and the sorted names of the
    others, each once: what the call ignores, at any level (`sync_context`'s members included;
    those are never refused). Without `items`, a batch's items are known to carry no member
    the service does not read.
    """
    if not isinstance(data, dict):
        return [], []
    members = _Members()
    members.sort_out(data, SINGLE_MEMBERS if single else BATCH_MEMBERS, ())
    members.sort_out(data.get("sync_context"), CONTEXT_MEMBERS, ("sync_context",), refuse=False)
    products = data.get("products")
    if (
        items
        and not single
        and isinstance(products, list)
        and sync_limit_problem(len(products)) is None
    ):
        for index, item in enumerate(products):
            members.sort_out(item, ITEM_MEMBERS, ("products", index))
    # A NUL in a name is answered and kept as U+FFFD: PostgreSQL's text and jsonb (the audit
    # row, a replay's stored answer) cannot hold it.
    return members.problems, sorted({name.replace("\x00", "\ufffd") for name in members.ignored})


class _Members:
    """The unknown members of one body as `member_problems` sorts them out, each name's near
    miss worked out once (a batch repeats its items' names)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.ignored: set[str] = set()
        self._meant: dict[tuple[tuple[str, ...], str], str | None] = {}

    def sort_out(
        self, members: Any, known: tuple[str, ...], loc: tuple, *, refuse: bool = True
    ) -> None:
        if not isinstance(members, dict) or _KNOWN[known].issuperset(members):
            return
        for name, value in members.items():
            if name in _KNOWN[known] or (not loc and name == DRY_RUN_MEMBER):
                continue
            if (known, name) not in self._meant:
                self._meant[known, name] = near_miss(name, known) if refuse else None
            field = self._meant[known, name]
            if field is None:
                self.ignored.add(name)
                continue
            self.problems.append(
                Problem(
                    loc=(*loc, name),
                    msg=f"did you mean {field!r}?",
                    type="unknown_field",
                    input=value,
                    ctx={"field": field},
                )
            )


_KNOWN = {
    known: frozenset(known)
    for known in (ITEM_MEMBERS, BATCH_MEMBERS, SINGLE_MEMBERS, CONTEXT_MEMBERS)
}


def sync_max_items() -> int:
    """Items per request: the smaller of the sync and catalogue-sync maxima."""
    return min(settings.SYNC_MAX_ITEMS, settings.CATALOG_SYNC_MAX_ITEMS)


def sync_limit_problem(count: int) -> Problem | None:
    """The problem of a batch of `count` items, if it has more than a request may carry."""
    limit = sync_max_items()
    if count <= limit:
        return None
    return Problem(
        loc=("products",),
        msg=f"At most {limit} items per request; got {count}",
        type="too_long",
        ctx={"max_length": limit, "actual_length": count},
    )


def duplicate_key_problems(
    items: Sequence[ProductItem],
    codes: Sequence[str] | None = None,
    *,
    indexes: Sequence[int] | None = None,
) -> list[Problem]:
    """A problem for every item whose key another item of the batch has too, for the same
    warehouse (`codes`: each item's warehouse code; None when every item is for one).
    `indexes`: each item's position in the batch, when `items` are some of its items."""
    # item.key of every item, without a property call each.
    eans = list(map(item_ean, items))
    if not all(eans):
        eans = [ean or "" for ean in eans]
    keys = list(zip(eans, map(item_stock_code, items), strict=True))
    if codes is not None and len(set(codes)) > 1:
        keys = list(zip(eans, map(item_stock_code, items), codes, strict=True))
    if len(set(keys)) == len(keys):
        return []
    positions: dict[tuple, list[int]] = defaultdict(list)
    for position, key in enumerate(keys):
        positions[key].append(position)
    problems = []
    for key, group in positions.items():
        if len(group) < 2:
            continue
        ean, stock_code = key[:2]
        where = f", warehouse={key[2]!r}" if len(key) > 2 else ""
        named = [items[position].warehouse for position in group]
        at = [indexes[position] for position in group] if indexes is not None else group
        msg = f"Duplicate key (ean={ean!r}, stock_code={stock_code!r}{where}) at items {at}"
        default = settings.DEFAULT_WAREHOUSE
        if default in named and not all(named):
            # The same level twice, though one item names a warehouse and the other none.
            msg += (
                f": an item without a warehouse is for the default warehouse {default!r}, the "
                f"same level as an item for {default!r}"
            )
        for index in at:
            problems.append(
                Problem(
                    loc=("products", index, "stock_code"),
                    msg=msg,
                    type="duplicate_key",
                    input=stock_code,
                    ctx={"indexes": at, "ean": ean, "stock_code": stock_code},
                )
            )
    problems.sort(key=lambda p: p.loc[1])
    return problems


def request_problems(
    items: Sequence[ProductItem], *, single: bool, codes: Sequence[str] | None = None
) -> list[Problem]:
    """The batch's problems found without reading anything: too many items, repeated keys
    (per warehouse: `codes`, each item's warehouse code)."""
    if single:
        return []
    too_many = sync_limit_problem(len(items))
    return [too_many] if too_many else duplicate_key_problems(items, codes)


# How many stored codes a refusal of an unknown warehouse lists.
LISTED_WAREHOUSES = 20


def unknown_warehouse_problems(
    codes: Sequence[str | None], known: Collection[str], *, single: bool = False
) -> list[Problem]:
    """A problem for every item (by position; `codes`: each item's `warehouse`) that names a
    warehouse with no stored code in `known` (absent, null and "" name the default one)."""
    unknown = {code for code in codes if code and code not in known}
    if not unknown:
        return []
    # Code points, as warehouses are ordered (not a database's collation).
    stored = sorted(Warehouse.objects.values_list("code", flat=True))
    listed = ", ".join(map(repr, stored[:LISTED_WAREHOUSES]))
    if len(stored) > LISTED_WAREHOUSES:
        listed += f" and {len(stored) - LISTED_WAREHOUSES} more"
    by_case: dict[str, list[str]] = defaultdict(list)
    for code in stored:
        by_case[code.casefold()].append(code)
    problems = []
    for index, code in enumerate(codes):
        if code not in unknown:
            continue
        msg = f"No warehouse with code {code!r}"
        if alike := by_case.get(code.casefold()):
            msg += f" (codes are case-sensitive: did you mean {' or '.join(map(repr, alike))}?)"
        msg += f". Warehouses: {listed}." if stored else ". No warehouse is stored."
        problems.append(
            Problem(
                loc=("warehouse",) if single else ("products", index, "warehouse"),
                msg=msg,
                type="unknown_warehouse",
                input=code,
            )
        )
    return problems


def unresolved_problem(item: ProductItem, reason: str) -> Problem:
    """Why a single item with an unknown or ambiguous key is refused."""
    if reason == PendingProduct.Reason.AMBIGUOUS:
        return Problem(
            loc=("stock_code",),
            msg=(
                f"stock_code {item.stock_code!r} matches more than one product; "
                "send the EAN to choose one. The key was recorded for staff."
            ),
            type="ambiguous_key",
            input=item.stock_code,
        )
    return Problem(
        loc=("ean", "stock_code") if item.ean else ("stock_code",),
        msg=(
            f"No product with key (ean={item.ean or ''!r}, stock_code={item.stock_code!r}); "
            "the key was recorded as a pending product for staff."
        ),
        type="unknown_key",
        input=item.stock_code,
    )
