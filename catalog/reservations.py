"""Stock that shop orders hold back from sale: reservations and each product's `reserved`.

A reservation is a row with its own state (open, consumed, released), never a hidden decrement
of the partner system's figure. `Product.reserved` is the sum of a product's open reservations,
rewritten in the same transaction as every change, so the two never disagree: summed again
from them, or, when a sync consumes reservations on PostgreSQL, less exactly the units it
consumed (`_consume_subtracting`).

Every writer here runs inside its caller's transaction, with the products' rows locked by the
caller (placement, sync) or locked here in primary-key order (release, booking), so that
concurrent writers queue instead of deadlocking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import connection
from django.db.models import IntegerField, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from catalog.models import Product, Reservation

State = Reservation.State
# Up to this many applied products, the sync's question names them; a larger batch reads every
# booked open reservation (few beside a batch's thousands of products) and picks its own.
_PRODUCTS_ASKED_BY_ID = 500


def reservations_open(*, order_id: int, lines: Sequence[tuple[int, int]], now: datetime) -> None:
    """Hold `quantity` of each (product_id, quantity) for the order; products already locked."""
    Reservation.objects.bulk_create(
        [
            Reservation(
                order_id=order_id,
                product_id=product_id,
                quantity=quantity,
                created_at=now,
                changed_at=now,
                cause="placed by the shop",
            )
            for product_id, quantity in lines
        ]
    )
    _recount({product_id for product_id, _ in lines})


def reservations_release(*, order_id: int, cause: str, now: datetime) -> int:
    """Give the order's open reservations back to sale; returns the units released."""
    open_rows = list(
        Reservation.objects.filter(order_id=order_id, state=State.OPEN).values_list(
            "pk", "product_id", "quantity"
        )
    )
    if not open_rows:
        return 0
    product_ids = sorted({product_id for _, product_id, _ in open_rows})
    # The products first, in id order, as every other writer of `reserved` takes them.
    list(Product.objects.select_for_update().filter(pk__in=product_ids).order_by("pk").values("pk"))
    Reservation.objects.filter(pk__in=[pk for pk, _, _ in open_rows], state=State.OPEN).update(
        state=State.RELEASED, changed_at=now, cause=cause
    )
    _recount(product_ids)
    return sum(quantity for _, _, quantity in open_rows)


def reservations_book(*, order_id: int, booked_at: datetime, now: datetime) -> int:
    """From `booked_at` on, the partner system's figures count the order.

    A figure that counts it may have arrived first: each open reservation whose product already
    holds a document time (`posted_at`, stored by a sync) at or after `booked_at` is consumed at
    once, so the order is never subtracted twice while the product waits for its next sync.
    Returns the reservations consumed.
    """
    product_ids = sorted(
        set(
            Reservation.objects.filter(order_id=order_id, state=State.OPEN).values_list(
                "product_id", flat=True
            )
        )
    )
    if not product_ids:
        return 0
    # The products first, in id order, as every other writer of `reserved` takes them: a sync
    # of one of them either committed its document time before this reads it, or waits and
    # then sees the booking.
    held = (
        Product.objects.select_for_update()
        .filter(pk__in=product_ids)
        .order_by("pk")
        .values_list("pk", "posted_at")
    )
    counted = {pk: posted_at for pk, posted_at in held if posted_at and posted_at >= booked_at}
    Reservation.objects.filter(order_id=order_id, state=State.OPEN).update(
        booked_at=booked_at,
        changed_at=now,
        cause=f"booked by the partner system from {booked_at.isoformat()}",
    )
    consumed = 0
    for document_time in sorted(set(counted.values())):
        consumed += Reservation.objects.filter(
            order_id=order_id,
            state=State.OPEN,
            product_id__in=[pk for pk, held_at in counted.items() if held_at == document_time],
        ).update(
            state=State.CONSUMED,
            changed_at=now,
            cause=(
                f"in the partner system's figures of {document_time.isoformat()}, held when "
                "the order was acknowledged"
            ),
        )
    if counted:
        _recount(set(counted))
    return consumed


def reservations_unbook(*, order_ids: Iterable[int], now: datetime, cause: str) -> None:
    """The partner system's acknowledgement was taken back: no figure counts the orders."""
    Reservation.objects.filter(order_id__in=list(order_ids), state=State.OPEN).update(
        booked_at=None, changed_at=now, cause=cause
    )


def reservations_consume(
    *, product_ids: Iterable[int], document_time: datetime, audit_id: int | None, now: datetime
) -> int:
    """A sync applied these (locked) products with figures from `document_time`: the open
    reservations booked at or before it are in those figures now. Returns how many."""
    applied = set(product_ids)
    booked = Reservation.objects.filter(
        state=State.OPEN, booked_at__isnull=False, booked_at__lte=document_time
    )
    if len(applied) <= _PRODUCTS_ASKED_BY_ID:
        # A single item or a small batch asks for its own products' reservations (the partial
        # index of open ones by product), however many other orders wait to be consumed.
        booked = booked.filter(product_id__in=applied)
    booked = list(booked.values_list("pk", "product_id"))
    if not booked:
        return 0
    consumed = [(pk, product_id) for pk, product_id in booked if product_id in applied]
    if not consumed:
        return 0
    cause = f"in the partner system's figures of {document_time.isoformat()}"
    pks = [pk for pk, _ in consumed]
    if connection.vendor == "postgresql":
        return _consume_subtracting(
            pks, document_time=document_time, audit_id=audit_id, now=now, cause=cause
        )
    # The conditions again: an acknowledgement taken back (unbooked) after the read above
    # committed while this statement waited for the row; the row as it is now decides.
    count = Reservation.objects.filter(
        pk__in=pks,
        state=State.OPEN,
        booked_at__isnull=False,
        booked_at__lte=document_time,
    ).update(state=State.CONSUMED, changed_at=now, sync_audit_id=audit_id, cause=cause)
    _recount({product_id for _, product_id in consumed})
    return count


def _consume_subtracting(
    pks: list[int], *, document_time: datetime, audit_id: int | None, now: datetime, cause: str
) -> int:
    """`reservations_consume`'s writes on PostgreSQL, in one statement: the reservations that
    are still open and booked by `document_time` (the rows as they are when locked decide, as
    above) are consumed, and exactly their units leave their products' `reserved`.

    The same result as summing each product's open reservations again (`_recount`), which
    the products' row locks, held by the sync, make exact: every other writer of a product's
    open reservations takes its row first. The sum would have to walk the index of open
    reservations past every entry a consumed one left until VACUUM clears it.
    """
    quote = connection.ops.quote_name
    reservations = quote(Reservation._meta.db_table)
    products = quote(Product._meta.db_table)
    reserved = quote(Product._meta.get_field("reserved").column)
    sql = (
        f"WITH consumed AS (UPDATE {reservations} SET state = %s, changed_at = %s, "
        "sync_audit_id = %s, cause = %s "
        "WHERE id = ANY(%s) AND state = %s AND booked_at IS NOT NULL AND booked_at <= %s "
        "RETURNING product_id, quantity), "
        "units AS (SELECT product_id, SUM(quantity) AS units, COUNT(*) AS consumed "
        "FROM consumed GROUP BY product_id) "
        f"UPDATE {products} AS p SET {reserved} = p.{reserved} - units.units FROM units "
        "WHERE p.id = units.product_id RETURNING units.consumed"
    )
    params = [State.CONSUMED, now, audit_id, cause, pks, State.OPEN, document_time]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return sum(count for (count,) in cursor.fetchall())


def reservations_recount(*, product_ids: Iterable[int] | None = None) -> None:
    """Rewrite `reserved` from the open reservations (all products when none are named)."""
    _recount(None if product_ids is None else set(product_ids))


def _recount(product_ids: set[int] | None) -> None:
    open_units = (
        Reservation.objects.filter(product=OuterRef("pk"), state=State.OPEN)
        .order_by()
        .values("product")
        .annotate(units=Sum("quantity"))
        .values("units")
    )
    products = (
        Product.objects.all() if product_ids is None else Product.objects.filter(pk__in=product_ids)
    )
    products.update(reserved=Coalesce(Subquery(open_units, output_field=IntegerField()), Value(0)))
