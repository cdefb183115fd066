"""The reservation model with three warehouses (decisions.md, "# Warehouses").

The machine of `test_reservation_model.py`, every rule and invariant of it, run over the default
warehouse and two more, one of the three (drawn per example) stopping and starting to sell
during the run. Its levels are small (0 to 4 units a warehouse) and its lines ask for up to 5
units, so that placements often split a line across warehouses. On top of the single-warehouse
machine:

- each sync item names a warehouse (the default one in each of its spellings), a product may
  come once per warehouse in a batch with one price, batch and single item, document times
  earlier than, equal to and later than those the levels and products hold, or none;
- a late document for a warehouse whose level holds an earlier time than its product: the
  level applies, the price does not (it carries another), the item counts as updated;
- the warehouses' priorities are drawn per example (ties are frequent: then the code decides,
  by code point: "DROP" < "MAIN" < "east");
- the warehouse that stops selling leaves the sums at once and takes no more units; its open
  reservations stay open, are consumed by its levels' syncs and released by cancellations;
- orders leave in parcels (decisions.md, "# Shipments"): some units of some lines, more than
  remain (409 `over`), every unit that remains, a parcel sent again (200) or another parcel
  under its id (409), parcels of orders that take none (409); the model counts each line's
  shipped units and moves the status (`partially_shipped`, `shipped`, `delivered`).

After every step, besides the single-warehouse checks: each level's quantity, reserved units
and document time, each product's sums, document time and price, the stock query's
`warehouses`, each reservation (one per part of a line, pinned to its warehouse), each order
item's `allocations` and `shipped`, each order's `shipments` and status are the model's:
shipments change no stock.

The default run is a fixed set of seeds (`SEEDS`, chosen with `tests/mutations/plant.py
--model`, docs/TESTING.md); `MODEL_TEST_SEEDS` and `MODEL_TEST_RUNS` work as for the
single-warehouse machine.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

import stock.reservations
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.shop.test_reservation_model import (
    ACKNOWLEDGED,
    CANCELLED,
    DEFAULT_BUFFER,
    DELIVERED,
    ITEM,
    PARTIALLY_SHIPPED,
    PENDING,
    PRICES,
    SEEN,
    SYNC,
    THRESHOLD,
    ModelLevel,
    ModelOrder,
    ModelProduct,
    ModelShipment,
    ModelWarehouse,
    ReservationMachine,
    SentItem,
    _booked,
    _iso,
    _run,
    _seen,
    shrink_budget,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

# The default run: these seeds, each for EXAMPLES examples of up to STEPS steps (measured with
# tests/mutations/plant.py --model, docs/TESTING.md).
SEEDS = tuple(int(n) for n in os.environ.get("MODEL_TEST_SEEDS", "2,3,6").split(","))
EXAMPLES = 12
STEPS = 30

# The statuses that take no new parcel (a repeat of one it has is still answered).
FINAL = (DELIVERED, CANCELLED)

# The warehouses beside the default one: code, name, lead time in days.
OTHERS = (("DROP", "Supplier drop-ship", 5), ("east", "East branch", 1))


class WarehouseMachine(ReservationMachine):
    LEVELS = st.integers(0, 4)
    LINES = 2
    LINE_QUANTITIES = st.integers(1, 4)

    @initialize(
        priorities=st.tuples(*[st.sampled_from([10, 100])] * 3),
        switching=st.integers(0, 2),
        products=st.lists(
            st.tuples(
                st.integers(0, 4),
                st.none() | st.integers(0, 4),
                st.none() | st.integers(0, 4),
                st.sampled_from([None, 0, 2]),
            ),
            min_size=3,
            max_size=4,
        ),
        asked_by_id=st.sampled_from([THRESHOLD, 1]),
    )
    def catalogue(self, priorities, switching, products, asked_by_id):
        """The warehouses (each one's priority drawn: the default one's changed too), the one
        that will stop and start selling, the products with a level in the default warehouse
        and, or not, in each other one, and how many applied products a sync asks for by id."""
        stock.reservations._PRODUCTS_ASKED_BY_ID = asked_by_id
        main, *others = priorities
        warehouse_save(self.main, priority=main)
        self.model.warehouses[0].priority = main
        for (code, name, lead_time_days), priority in zip(OTHERS, others, strict=True):
            warehouse, _ = warehouse_save(
                code, name=name, priority=priority, lead_time_days=lead_time_days
            )
            self.model.warehouses.append(
                ModelWarehouse(warehouse.pk, code, name, priority, lead_time_days)
            )
        self.switching = self.model.warehouses[switching]
        for main_units, *elsewhere, buffer in products:
            product = ProductFactory(shop_quantity=main_units, safety_buffer=buffer)
            levels = {self.main: ModelLevel(main_units)}
            for warehouse, units in zip(self.model.warehouses[1:], elsewhere, strict=True):
                if units is not None:
                    set_level(product, warehouse, units)
                    levels[warehouse.code] = ModelLevel(units)
            self.model.products.append(
                ModelProduct(product.pk, product.stock_code, product.ean, buffer, levels=levels)
            )

    @rule(data=st.data())
    def the_warehouse_stops_or_starts_selling(self, data):
        """Staff switch the warehouse's selling off, or on again: its levels and open
        reservations leave the sums at once, or count again. (Drawn one time in three: a rule
        without a draw of its own would be chosen far more often than the others.)"""
        if data.draw(st.integers(0, 2), label="switch") != 0:
            return
        warehouse = self.switching
        warehouse.sells = not warehouse.sells
        warehouse_save(warehouse.code, sells=warehouse.sells)
        _seen("warehouse sells again" if warehouse.sells else "warehouse stops selling")

    def _earlier_levels(self) -> list[tuple[ModelProduct, str]]:
        """(product, warehouse code) of each level (or warehouse without one) whose time is
        earlier than its product's: an older document for it applies the level only."""
        return [
            (product, w.code)
            for product in self.model.products
            if product.posted_at is not None
            for w in self.model.warehouses
            if w.code not in product.levels
            or product.levels[w.code].posted_at is None
            or product.levels[w.code].posted_at < product.posted_at
        ]

    @precondition(lambda self: self._earlier_levels())
    @rule(data=st.data())
    def an_older_document_for_another_warehouse(self, data):
        """A document older than its product's, for a warehouse whose level holds an earlier
        one (or none): the level applies, the price it carries does not; with, now and then,
        the product's other levels in the same batch (those that hold a later time are
        stale)."""
        product, code = data.draw(st.sampled_from(self._earlier_levels()), label="level")
        level = product.levels.get(code)
        times = [product.posted_at - timedelta(microseconds=1)]
        if level is not None and level.posted_at is not None:
            times.append(level.posted_at)
        posted_at = data.draw(st.sampled_from(times), label="posted_at")
        price = data.draw(
            st.sampled_from([p for p in PRICES if p != product.eshop_price]), label="price"
        )
        codes = [code]
        if data.draw(st.booleans(), label="with its other levels"):
            codes += [w.code for w in self.model.warehouses if w.code != code]
        items = [
            SentItem(product, data.draw(self.LEVELS, label="level"), each, price) for each in codes
        ]
        rows = self._rows(data, items)
        context = {"source_type": "stock_adjustment", "posted_at": _iso(posted_at)}
        request_id = self._next("LATE-LEVEL")
        if len(rows) == 1 and data.draw(st.booleans(), label="single"):
            body = {**rows[0], "sync_context": context, "request_id": request_id}
            path = ITEM
        else:
            body = {"products": rows, "sync_context": context, "request_id": request_id}
            path = SYNC
        self._send_sync(path, body, dry_run=False, items=items, posted_at=posted_at)

    def _splittable(self) -> list[ModelProduct]:
        """The products that can sell more than any one warehouse holds for sale."""
        return [
            product
            for product in self.model.products
            if self.model.salable(product)
            > max((w["salable"] for w in self.model.stock_warehouses(product)), default=0)
        ]

    @precondition(lambda self: self._splittable())
    @rule(data=st.data())
    def place_a_line_no_warehouse_covers(self, data):
        """A line that asks for more than any one selling warehouse has, and no more than its
        product can sell: its units are taken warehouse by warehouse."""
        product = data.draw(st.sampled_from(self._splittable()), label="product")
        most = max((w["salable"] for w in self.model.stock_warehouses(product)), default=0)
        quantity = data.draw(st.integers(most + 1, self.model.salable(product)), label="quantity")
        self._place(data, [product], [quantity])

    @precondition(lambda self: self.model.orders)
    @rule(data=st.data())
    def a_level_in_a_warehouse_the_order_took_nothing_from(self, data):
        """An order's product (mostly an order's the partner system booked), pushed for a
        warehouse none of its units came from, with figures that would count the order: it
        consumes nothing of the order."""
        booked = [o for o in self.model.orders if _booked(o)]
        order = data.draw(st.sampled_from(booked or self.model.orders), label="order")
        pairs = [
            (self.model.product(pk), w.code)
            for pk in order.lines
            for w in self.model.warehouses
            if (pk, w.code) not in order.parts
        ]
        if not pairs:
            return
        product, code = data.draw(st.sampled_from(pairs), label="level")
        posted_at = data.draw(
            st.sampled_from([None, self.future, order.booked_at]), label="posted_at"
        )
        sent = SentItem(product, data.draw(self.LEVELS, label="level"), code)
        context = {"source_type": "stock_receipt"}
        if posted_at is not None:
            context["posted_at"] = _iso(posted_at)
        body = {
            **self._rows(data, [sent])[0],
            "sync_context": context,
            "request_id": self._next("ELSEWHERE"),
        }
        _seen("sync elsewhere")
        self._send_sync(ITEM, body, dry_run=False, items=[sent], posted_at=posted_at)

    # -- shipments ----------------------------------------------------------------------------

    @precondition(lambda self: any(o.state == ACKNOWLEDGED for o in self.model.orders))
    @rule(data=st.data())
    def ship(self, data):
        """One to three parcels of an order (mostly one the partner system acknowledged and
        that still takes parcels): some units of some of its lines, now and then more than
        remain, or every unit that remains; or a parcel it recorded sent again, the same (its
        delivery kept, given or cleared) or another one under its id; and, when the order is
        then partially shipped, now and then its last units at once. Shipments move the
        order's status and change no stock (the invariants check both)."""
        theirs = [o for o in self.model.orders if o.state == ACKNOWLEDGED]
        # Mostly one that still takes parcels.
        open_ = [o for o in theirs if o.status not in FINAL]
        pick = data.draw(st.integers(0, 5), label="which order")
        if pick == 0:
            order = data.draw(st.sampled_from(self.model.orders), label="order")
        elif pick == 1 or not open_:
            order = data.draw(st.sampled_from(theirs), label="order")
        else:
            order = data.draw(st.sampled_from(open_), label="order")
        for _ in range(data.draw(st.integers(1, 3), label="parcels")):
            kinds = ["new", "new", "repeat", "conflict"] if order.shipments else ["new"]
            self._send_parcel(data, order, data.draw(st.sampled_from(kinds), label="parcel"))
        if (
            order.state == ACKNOWLEDGED
            and order.status == PARTIALLY_SHIPPED
            and data.draw(st.booleans(), label="then the rest")
        ):
            # The order's second parcel at once: its last units.
            self._send_parcel(data, order, "rest")

    @precondition(lambda self: any(o.shipments for o in self.model.orders))
    @rule(data=st.data())
    def ship_again(self, data):
        """A parcel an order has, sent again: the same (a retry: its delivery kept, given or
        cleared) or another parcel under its id."""
        order = data.draw(
            st.sampled_from([o for o in self.model.orders if o.shipments]), label="order"
        )
        kind = data.draw(st.sampled_from(["repeat", "conflict"]), label="parcel")
        self._send_parcel(data, order, kind)

    def _send_parcel(self, data, order: ModelOrder, kind: str) -> None:
        """Send a parcel of the order: "new" (some units of some lines, now and then more than
        remain, or every unit that remains), "rest" (every unit that remains), "repeat" (a
        parcel it has, its delivery kept, given or cleared) or "conflict" (a parcel it has,
        with another warehouse or one more unit of a line)."""
        warehouses = [None, "", *(w.code for w in self.model.warehouses)]
        if kind in ("new", "rest"):
            shipment_id = self._next("PARCEL")
            remaining = [
                ordered - shipped
                for ordered, shipped in zip(order.lines.values(), order.shipped(), strict=True)
            ]
            if any(remaining) and (kind == "rest" or data.draw(st.booleans(), label="the rest")):
                # Every unit that remains: the parcel completes the order.
                lines = {index: units for index, units in enumerate(remaining) if units}
            else:
                indexes = data.draw(
                    st.lists(st.sampled_from(range(len(order.lines))), min_size=1, unique=True),
                    label="lines",
                )
                # One more than remains, now and then: more than was ordered.
                lines = {
                    index: data.draw(st.integers(1, remaining[index] + 1), label="quantity")
                    for index in indexes
                }
            warehouse = data.draw(st.sampled_from(warehouses), label="warehouse")
            shipped_at = self.start - timedelta(hours=1) + timedelta(seconds=self.counter)
            body = {"shipment_id": shipment_id, "shipped_at": _iso(shipped_at)}
            delivered_at = None
            if data.draw(st.booleans(), label="delivered"):
                delivered_at = shipped_at + timedelta(minutes=1)
                body["delivered_at"] = _iso(delivered_at)
        else:
            shipment_id = data.draw(st.sampled_from(sorted(order.shipments)), label="shipment")
            parcel = order.shipments[shipment_id]
            shipped_at = parcel.shipped_at
            lines = dict(parcel.lines)
            # Not said: absent, null or "".
            spellings = [None, ""] if parcel.warehouse is None else [parcel.warehouse]
            warehouse = data.draw(st.sampled_from(spellings), label="warehouse")
            body = {"shipment_id": shipment_id}
            delivered_at = parcel.delivered_at
            delivery = data.draw(st.sampled_from(["keep", "deliver", "clear"]), label="delivery")
            if delivery == "deliver":
                delivered_at = parcel.shipped_at + timedelta(minutes=2)
                body["delivered_at"] = _iso(delivered_at)
            elif delivery == "clear":
                delivered_at = body["delivered_at"] = None
            if kind == "conflict":
                other = [code for code in warehouses if code and code != parcel.warehouse]
                if data.draw(st.booleans(), label="another warehouse"):
                    warehouse = data.draw(st.sampled_from(other), label="warehouse")
                else:
                    line = data.draw(st.sampled_from(sorted(lines)), label="line")
                    lines[line] += 1
        if warehouse is not None or data.draw(st.booleans(), label="warehouse null"):
            body["warehouse"] = warehouse
        body["lines"] = [
            {"line": index, "quantity": quantity}
            for index, quantity in data.draw(
                st.permutations(list(lines.items())), label="order of lines"
            )
        ]
        response = self.partner.post(
            f"/api/v1/partner/orders/{order.pk}/shipments", body, format="json"
        )
        parcel = ModelShipment(warehouse or None, lines, shipped_at, delivered_at)
        self._shipment_answered(order, kind, shipment_id, parcel, response)

    def _shipment_answered(
        self, order: ModelOrder, kind: str, shipment_id: str, parcel: ModelShipment, response
    ) -> None:
        """What the service answered a parcel, against the model; the model follows."""
        answer = response.json()
        if order.state == CANCELLED:
            _seen("ship cancelled by the shop")
            assert response.status_code == 409, answer
            assert answer["status"] == CANCELLED
            return
        if order.state == PENDING:
            _seen("ship pending")
            assert response.status_code == 409, answer
            assert answer["partner_sync_status"] == PENDING
            return
        if kind == "repeat":
            _seen(f"ship repeat {order.status}")
            assert response.status_code == 200, answer
            assert response["Idempotent-Replayed"] == "true"
            order.shipments[shipment_id].delivered_at = parcel.delivered_at
            order.follow_shipments()
            self._check_record(order, answer)
            assert answer["status"] == order.status
            return
        if order.status in FINAL:
            _seen(f"ship {order.status}")
            assert response.status_code == 409, answer
            assert answer["status"] == order.status
            return
        if kind == "conflict":
            _seen("ship conflict")
            assert response.status_code == 409, answer
            assert answer["shipment_id"] == shipment_id
            return
        shipped = order.shipped()
        over = [
            {
                "line": index,
                "ordered": list(order.lines.values())[index],
                "shipped": shipped[index],
                "requested": quantity,
            }
            for index, quantity in sorted(parcel.lines.items())
            if shipped[index] + quantity > list(order.lines.values())[index]
        ]
        if over:
            _seen("ship over")
            assert response.status_code == 409, answer
            assert answer["over"] == over
            return
        assert response.status_code == 201, answer
        before = order.status
        order.shipments[shipment_id] = parcel
        order.follow_shipments()
        _seen(f"ship {before} -> {order.status}")
        self._check_record(order, answer)
        assert answer["status"] == order.status


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.usefixtures("shrink_budget")
@override_settings(STOCK_SAFETY_BUFFER=DEFAULT_BUFFER)
def test_the_reservations_follow_the_model_over_three_warehouses(seed):
    SEEN.clear()
    _run(WarehouseMachine, seed=seed, examples=EXAMPLES, steps=STEPS)
    print(f"seed {seed}: {dict(sorted(SEEN.items()))}")
    # The run did what it is for: orders placed and refused, lines split across warehouses,
    # levels applied without their prices, stale documents, a warehouse that stopped selling,
    # parcels over what remained.
    for seen in (
        "place placed",
        "place short",
        "place split",
        "sync level only",
        "sync stale 1+",
        "warehouse stops selling",
        "ship over",
    ):
        assert SEEN[seen], (seen, SEEN)
    # And a parcel that completed an order it moved (from new or partially shipped).
    assert any(
        SEEN[f"ship {before} -> {after}"]
        for before in ("new", "partially_shipped")
        for after in ("shipped", "delivered")
    ), SEEN


@pytest.mark.skipif(
    not os.environ.get("MODEL_TEST_RUNS"),
    reason="MODEL_TEST_RUNS=N runs N batches of fresh random examples (CI sets it)",
)
@pytest.mark.usefixtures("shrink_budget")
@override_settings(STOCK_SAFETY_BUFFER=DEFAULT_BUFFER)
def test_the_reservations_follow_the_model_over_three_warehouses_on_fresh_examples():
    """Fresh random examples every run, beyond the fixed seeds, bounded in time."""
    SEEN.clear()
    runs = int(os.environ["MODEL_TEST_RUNS"])
    seconds = float(os.environ.get("MODEL_TEST_SECONDS", 120))
    started = time.monotonic()
    for _ in range(runs):
        if time.monotonic() - started > seconds:
            break
        _run(WarehouseMachine, seed=None, examples=EXAMPLES, steps=STEPS)
    print(f"{time.monotonic() - started:.0f} s: {dict(sorted(SEEN.items()))}")
