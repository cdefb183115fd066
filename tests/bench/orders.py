"""Order scenarios of the benchmark: a poll of pending orders, an acknowledgement, and pages
of a large backlog against the whole unpaged answer."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc
from datetime import timedelta
from decimal import Decimal

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orders.models import Order, OrderItem
from orders.selectors import OrderKey, order_cursor_encode


class OrdersBench:
    def __init__(self, bench):
        self.bench = bench
        self.orders = 50 if bench.quick else 1000
        # The backlog of the paging scenarios: a week of ERP downtime.
        self.backlog = 1500 if bench.quick else 30_000

    def seed(self, count: int | None = None) -> list[int]:
        count = self.orders if count is None else count
        OrderItem.objects.all().delete()
        Order.objects.all().delete()
        start = timezone.now() - timedelta(days=1)
        orders = Order.objects.bulk_create(
            Order(
                order_number=f"BENCH-{n:06d}",
                created_at=start + timedelta(seconds=n),
                status="new",
                customer_name=f"Customer {n}",
                customer_email=f"customer{n}@example.com",
                customer_phone="+420 777 000 000",
                customer_address="Main street 1",
                customer_city="Brno",
                customer_zip_code="60200",
                subtotal=Decimal("300.00"),
                vat_total=Decimal("63.00"),
                total=Decimal("363.00"),
                partner_sync_status=Order.PartnerStatus.PENDING_PARTNER,
            )
            for n in range(count)
        )
        OrderItem.objects.bulk_create(
            OrderItem(
                order=order,
                name=f"Tyre {line}",
                quantity=line + 1,
                unit_price=Decimal("100.00"),
                total=Decimal("100.00") * (line + 1),
                ean=f"859{line:010d}",
                stock_code=f"BENCH-{line:06d}",
            )
            for order in orders
            for line in range(3)
        )
        # A live table has planner statistics; a freshly bulk-loaded one has none until
        # autovacuum gets to it, and the planner would then sort the backlog instead of
        # reading the index in order.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE orders_order")
            cursor.execute("ANALYZE orders_orderitem")
        return [order.pk for order in orders]

    def run(self) -> None:
        bench = self.bench
        ids = self.seed()
        client = bench.client

        def poll(_: int) -> None:
            response = client.get("/api/v1/partner/orders")
            assert response.status_code == 200, response.content[:300]
            body = response.json()
            assert body["count"] == self.orders, body["count"]

        polls = bench.measure(poll, bench.runs)
        with CaptureQueriesContext(connection) as queries:
            poll(0)
        bench.record(f"poll of {self.orders} orders x 3 items ({len(queries)} queries)", polls)

        pending = iter(ids)

        def acknowledge(_: int) -> None:
            order_id = next(pending)
            response = client.post(
                f"/api/v1/partner/orders/{order_id}/acknowledge",
                json.dumps({"partner_reference": f"FA-{order_id}"}),
                content_type="application/json",
            )
            assert response.status_code == 200, response.content[:300]

        acks = bench.measure(acknowledge, min(bench.runs * 10, len(ids) - 10), warmup=5)
        bench.record("acknowledgement", acks)
        self.paging()

    def paging(self) -> None:
        """A page of 100 and of 1000 orders at the head, the middle and the end of the backlog,
        against the whole unpaged answer: time, Python memory at the peak, response size."""
        bench = self.bench
        ids = self.seed(self.backlog)
        client = bench.client
        keys = dict(Order.objects.filter(pk__in=ids).values_list("pk", "created_at"))

        def cursor_before(position: int) -> str:
            order_id = ids[position - 1]
            return order_cursor_encode(OrderKey(created_at=keys[order_id], order_id=order_id))

        def poll(query: str, expected: int):
            def run(_: int) -> None:
                response = client.get(f"/api/v1/partner/orders{query}")
                assert response.status_code == 200, response.content[:300]
                assert response.json()["count"] == expected, response.json()["count"]
                run.size = len(response.content)

            return run

        middle = self.backlog // 2
        scenarios = [
            (f"unpaged poll of {self.backlog} pending orders", "", self.backlog, 3),
        ]
        for limit in (100, 1000):
            scenarios += [
                (f"page of {limit}, first of {self.backlog}", f"?limit={limit}", limit, None),
                (
                    f"page of {limit}, from order {middle} of {self.backlog}",
                    f"?limit={limit}&cursor={cursor_before(middle)}",
                    min(limit, self.backlog - middle),
                    None,
                ),
                (
                    f"page of {limit}, last of {self.backlog}",
                    f"?limit={limit}&cursor={cursor_before(self.backlog - limit)}",
                    limit,
                    None,
                ),
            ]
        scenarios.append(
            (
                f"page of 100, partner_status=all, from order {middle}",
                f"?limit=100&partner_status=all&cursor={cursor_before(middle)}",
                100,
                None,
            )
        )
        lines = [f"paging, {self.backlog} pending orders x 3 items:"]
        for name, query, expected, runs in scenarios:
            run = poll(query, expected)
            times = bench.measure(run, runs or bench.runs, warmup=1)
            with CaptureQueriesContext(connection) as queries:
                run(0)
            query_count = len(queries)
            gc.collect()
            tracemalloc.start()
            run(0)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            bench.record(f"{name} ({query_count} queries)", times)
            lines.append(
                f"  {name}: response {run.size / 1e6:.2f} MB, peak Python memory "
                f"{peak / 1e6:.1f} MB, peak RSS added to a fresh process "
                f"{_rss_added_kb(query) / 1e3:.1f} MB"
            )
        bench.extra_lines = [*getattr(bench, "extra_lines", []), *lines]


def _rss_added_kb(query: str) -> int:
    """What one poll adds to the peak resident memory of a fresh process (Linux), in kB."""
    probe = subprocess.run(
        [
            sys.executable,
            os.path.join(os.path.dirname(__file__), "run.py"),
            "--rss-probe-poll",
            query,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env=os.environ,
    )
    return int(probe.stdout.split()[-1])
