"""Order scenarios of the benchmark: a poll of pending orders and an acknowledgement."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orders.models import Order, OrderItem


class OrdersBench:
    def __init__(self, bench):
        self.bench = bench
        self.orders = 50 if bench.quick else 1000

    def seed(self) -> list[int]:
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
            for n in range(self.orders)
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
