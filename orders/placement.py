"""The shop's writes: placing an order (which reserves its stock) and cancelling it.

Placement locks the products of all lines in primary-key order (as the sync does), checks every
line against what the product can sell, and stores the order, its items and its reservations in
one transaction: of concurrent placements for the last units, exactly as many succeed as the
stock allows. Each line's units are taken from the selling warehouses (the stock app's
`reservations_allocate`), read while the products are locked, so that no two placements take
the same units of a warehouse.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog.keys import ProductsByKey
from catalog.models import Product
from core.canonical import canonical_digest
from core.problems import Problem, Refused
from core.retry import run_with_retry
from core.signals import order_placement_recorded, send_at_commit
from orders.models import CUSTOMER_FIELDS, Order, OrderItem
from orders.schemas import ShopOrder, totals_problems
from orders.services import OrderNotFound, order_items, order_status_move, record_status_change
from orders.states import Actor, OrderSource, OrderStatus, PartnerStatus, shop_may_cancel
from stock.reservations import reservations_open

logger = logging.getLogger(__name__)


class OrderNumberTaken(Exception):
    """Another order (another body) already has this order number."""

    def __init__(self, order_id: int, order_number: str):
        super().__init__(
            f"Order number {order_number!r} is already taken by order {order_id}, placed with "
            "another body."
        )
        self.order_id = order_id


class OrderLinesRefused(Refused):
    """Totals or product keys of the order are wrong; nothing was stored."""


@dataclass(frozen=True)
class ShortLine:
    index: int
    stock_code: str
    ean: str
    requested: int
    salable: int


class StockShort(Exception):
    """One or more lines ask for more than their product can sell; nothing was stored."""

    def __init__(self, short: list[ShortLine]):
        super().__init__(
            f"Not enough stock for {len(short)} line(s): "
            + ", ".join(f"{s.stock_code} ({s.requested} > {s.salable})" for s in short[:5])
        )
        self.short = short


class Placed(NamedTuple):
    order: Order
    # True when the same placement was made before: nothing was stored or reserved again.
    replayed: bool


class ShopOrderCancelRefused(Exception):
    """The partner system has the order already: only it may cancel it now."""

    def __init__(self, order: Order):
        super().__init__(
            f"Order {order.pk} is acknowledged by the partner system "
            f"(partner_reference {order.partner_reference!r}); it can no longer be cancelled "
            "by the shop."
        )
        self.partner_reference = order.partner_reference


def order_place(*, order: ShopOrder, body: Any, by_name: str = "") -> Placed:
    """Store the shop's order and reserve its lines, or say why not (nothing half-done).

    `body` is the placement as the shop sent it (parsed JSON), `order` read from it: its
    canonical digest tells a replay (the same body) from another order under the same number.
    Every answer is announced (`order_placement_recorded`) when the transaction commits.
    """
    body_hash = canonical_digest(body)
    try:
        placed = _place_or_replay(order, body_hash=body_hash, by_name=by_name)
    except StockShort:
        _announce_placement("short")
        raise
    except (OrderLinesRefused, OrderNumberTaken):
        _announce_placement("refused")
        raise
    _announce_placement("replayed" if placed.replayed else "created")
    return placed


def order_placement_refused() -> None:
    """A placement refused before it reached `order_place` (its body is not JSON, or not an
    order): announced as the service's own refusals are."""
    _announce_placement("refused")


def _announce_placement(result: str) -> None:
    send_at_commit(order_placement_recorded, result=result)


def _place_or_replay(order: ShopOrder, *, body_hash: str, by_name: str) -> Placed:
    try:
        return run_with_retry(lambda: _place(order, body_hash=body_hash, by_name=by_name))
    except IntegrityError:
        # The same order number committed by a concurrent placement while this one waited.
        existing = Order.objects.filter(order_number=order.order_number).first()
        if existing is None:
            raise
        return _replay_or_conflict(existing, body_hash)


def _replay_or_conflict(existing: Order, body_hash: str) -> Placed:
    if existing.source == OrderSource.SHOP and existing.placement_hash == body_hash:
        return Placed(existing, replayed=True)
    raise OrderNumberTaken(existing.pk, existing.order_number)


def _place(order: ShopOrder, *, body_hash: str, by_name: str) -> Placed:
    now = timezone.now()
    with transaction.atomic():
        existing = Order.objects.filter(order_number=order.order_number).first()
        if existing is not None:
            return _replay_or_conflict(existing, body_hash)
        problems = totals_problems(order)
        products = _locked_products({line.stock_code for line in order.items})
        # The same placement sent again while this one waited for the locks has committed by
        # now: answer as if they had come one after the other (a replay, or the number taken),
        # never "short" because the first one took the last units.
        existing = Order.objects.filter(order_number=order.order_number).first()
        if existing is not None:
            return _replay_or_conflict(existing, body_hash)
        matched, key_problems = _match_lines(order, products)
        problems.extend(key_problems)
        if problems:
            raise OrderLinesRefused(problems)
        short = [
            ShortLine(
                index=index,
                stock_code=line.stock_code,
                ean=line.ean or "",
                requested=line.quantity,
                salable=available,
            )
            for index, (line, product) in enumerate(zip(order.items, matched, strict=True))
            if line.quantity > (available := product.salable)
        ]
        if short:
            raise StockShort(short)
        stored, items = _store(order, body_hash=body_hash, now=now)
        # Each line's units are taken from the selling warehouses, the products still locked.
        reservations_open(
            order_id=stored.pk,
            lines=[
                (product.pk, line.quantity)
                for line, product in zip(order.items, matched, strict=True)
            ],
            now=now,
            order_number=stored.order_number,
            items=[item.pk for item in items],
        )
        record_status_change(
            stored,
            old=None,
            new=OrderStatus.NEW,
            by=Actor.SHOP,
            by_name=by_name,
            at=now,
            detail="placed",
        )
    logger.info(
        "order %s (%s) placed by the shop: %d line(s), key=%s",
        stored.pk,
        stored.order_number,
        len(order.items),
        by_name or "-",
    )
    return Placed(stored, replayed=False)


def _locked_products(stock_codes: set[str]) -> ProductsByKey[Product]:
    rows = Product.objects.select_for_update().filter(stock_code__in=stock_codes).order_by("pk")
    return ProductsByKey(
        rows.only("pk", "ean", "stock_code", "shop_quantity", "reserved", "safety_buffer"),
        key=lambda product: (product.ean, product.stock_code),
    )


def _match_lines(
    order: ShopOrder, products: ProductsByKey[Product]
) -> tuple[list[Product | None], list[Problem]]:
    matched: list[Product | None] = []
    problems = []
    line_of_product: dict[int, int] = {}
    for index, line in enumerate(order.items):
        candidates = products.candidates(line.ean, line.stock_code)
        product = candidates[0] if len(candidates) == 1 else None
        matched.append(product)
        if not candidates or len(candidates) > 1:
            kind = "unknown_key" if not candidates else "ambiguous_key"
            problems.append(
                Problem(
                    loc=("items", index),
                    msg=(
                        f"No product has the key {_key_text(line)}"
                        if not candidates
                        else f"The key {_key_text(line)} names {len(candidates)} products; "
                        "send its EAN"
                    ),
                    type=kind,
                    ctx={"stock_code": line.stock_code, "ean": line.ean or ""},
                )
            )
            continue
        first = line_of_product.setdefault(product.pk, index)
        if first != index:
            problems.append(
                Problem(
                    loc=("items", index),
                    msg=f"Line {index} names the same product as line {first}",
                    type="duplicate_key",
                    ctx={"indexes": [first, index]},
                )
            )
    return matched, problems


def _key_text(line) -> str:
    return f"({line.ean!r}, {line.stock_code!r})" if line.ean else repr(line.stock_code)


def _store(order: ShopOrder, *, body_hash: str, now) -> tuple[Order, list[OrderItem]]:
    stored = Order(
        order_number=order.order_number,
        created_at=order.created_at or now,
        status=OrderStatus.NEW,
        subtotal=order.subtotal,
        vat_total=order.vat_total,
        total=order.total,
        currency=order.currency,
        partner_sync_status=PartnerStatus.PENDING_PARTNER,
        source=OrderSource.SHOP,
        placement_hash=body_hash,
        status_changed_at=now,
    )
    for name in CUSTOMER_FIELDS:
        setattr(stored, f"customer_{name}", getattr(order.customer, name))
    stored.save()
    return stored, OrderItem.objects.bulk_create(order_items(stored, order.items))


def shop_order_get(*, order_id: int) -> Order:
    """An order the shop placed through the service; OrderNotFound for any other id."""
    order = Order.objects.filter(pk=order_id, source=OrderSource.SHOP).first()
    if order is None:
        raise OrderNotFound(order_id)
    return order


class ShopCancelled(NamedTuple):
    order: Order
    # True when the shop had cancelled it before: nothing changed.
    repeated: bool


def order_cancel_by_shop(*, order_id: int, reason: str | None, by_name: str = "") -> ShopCancelled:
    """Cancel an order the partner system has not acknowledged; its stock goes back on sale."""
    return run_with_retry(lambda: _cancel(order_id, reason=reason, by_name=by_name))


def _cancel(order_id: int, *, reason: str | None, by_name: str) -> ShopCancelled:
    with transaction.atomic():
        order = (
            Order.objects.select_for_update().filter(pk=order_id, source=OrderSource.SHOP).first()
        )
        if order is None:
            raise OrderNotFound(order_id)
        if order.status == OrderStatus.CANCELLED and order.partner_sync_status is None:
            return ShopCancelled(order, repeated=True)
        if not shop_may_cancel(
            source=order.source,
            partner_sync_status=order.partner_sync_status,
            status=order.status,
        ):
            raise ShopOrderCancelRefused(order)
        order.cancel_reason = reason
        # It leaves the partner feed: the partner system never registered it.
        order.partner_sync_status = None
        released = order_status_move(
            order,
            OrderStatus.CANCELLED,
            by=Actor.SHOP,
            by_name=by_name,
            also=("cancel_reason", "partner_sync_status"),
            detail=reason or "",
        )
    logger.info(
        "order %s (%s) cancelled by the shop: %d unit(s) released, key=%s",
        order.pk,
        order.order_number,
        released,
        by_name or "-",
    )
    return ShopCancelled(order, repeated=False)
