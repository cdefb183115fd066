"""The request rules of a sync checked before anything is read: the item limit and repeated
keys (the import checks repeated keys too), and the problem of a single item's unresolved key."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

from django.conf import settings

from catalog.models import PendingProduct
from catalog.schemas import ProductItem
from core.problems import Problem
from sync.rows import item_ean, item_stock_code


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
    items: Sequence[ProductItem], codes: Sequence[str] | None = None
) -> list[Problem]:
    """A problem for every item whose key another item of the batch has too, for the same
    warehouse (`codes`: each item's warehouse code; None when every item is for one)."""
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
    for index, key in enumerate(keys):
        positions[key].append(index)
    problems = []
    for key, indexes in positions.items():
        if len(indexes) < 2:
            continue
        ean, stock_code = key[:2]
        where = f", warehouse={key[2]!r}" if len(key) > 2 else ""
        for index in indexes:
            problems.append(
                Problem(
                    loc=("products", index, "stock_code"),
                    msg=(
                        f"Duplicate key (ean={ean!r}, stock_code={stock_code!r}{where}) "
                        f"at items {indexes}"
                    ),
                    type="duplicate_key",
                    input=stock_code,
                    ctx={"indexes": indexes, "ean": ean, "stock_code": stock_code},
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


def unknown_warehouse_problems(
    codes: Sequence[str | None], known: Collection[str], *, single: bool = False
) -> list[Problem]:
    """A problem for every item (by position; `codes`: each item's `warehouse`) that names a
    warehouse with no stored code in `known` (absent, null and "" name the default one)."""
    problems = []
    for index, code in enumerate(codes):
        if not code or code in known:
            continue
        problems.append(
            Problem(
                loc=("warehouse",) if single else ("products", index, "warehouse"),
                msg=f"No warehouse with code {code!r}",
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
