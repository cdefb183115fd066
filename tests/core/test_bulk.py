"""The set-based writes behave the same through COPY (PostgreSQL) and plain statements."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from catalog.models import PendingProduct, Product
from core import bulk
from tests.factories import ProductFactory

FIELDS = ("name", "brand", "catalog_price", "updated_at")


@pytest.fixture(params=["copy", "statements"])
def write_path(request, monkeypatch):
    """Force either path; on SQLite both are plain statements."""
    monkeypatch.setattr(bulk, "COPY_THRESHOLD", 0 if request.param == "copy" else 10**9)
    return request.param


@pytest.mark.django_db(transaction=True)
def test_update_keeps_nulls_and_skips_unchanged_rows(write_path):
    old = timezone.now() - timedelta(days=1)
    a = ProductFactory(name="A", brand="Old", catalog_price=Decimal("10"), updated_at=old)
    b = ProductFactory(name="B", brand="Same", catalog_price=Decimal("20"), updated_at=old)
    c = ProductFactory(name=None, brand="C", catalog_price=Decimal("30"), updated_at=old)
    now = timezone.now()
    with transaction.atomic():
        bulk.bulk_update_rows(
            Product,
            FIELDS,
            [
                (a.pk, None, "New", Decimal("10.0000"), now),  # name kept, brand changes
                (b.pk, None, None, Decimal("20.0"), now),  # nothing changes: not written
                (c.pk, "Named", None, Decimal("30"), now),  # a null name gets a value
            ],
            keep_when_null=("name", "brand"),
            changed_only=("name", "brand", "catalog_price"),
        )
    a.refresh_from_db()
    b.refresh_from_db()
    c.refresh_from_db()
    assert (a.name, a.brand, a.catalog_price) == ("A", "New", Decimal("10"))
    assert a.updated_at == now
    assert (b.name, b.brand, b.updated_at) == ("B", "Same", old)
    assert (c.name, c.brand, c.updated_at) == ("Named", "C", now)


@pytest.mark.django_db(transaction=True)
def test_insert_with_conflict_clause_upserts(write_path):
    PendingProduct.objects.create(stock_code="P", ean="", reason="unknown", times_seen=2)
    now = timezone.now()
    fields = (
        "ean",
        "stock_code",
        "reason",
        "state",
        "payload",
        "first_seen",
        "last_seen",
        "times_seen",
        "resolved_by",
    )
    with transaction.atomic():
        bulk.bulk_insert_rows(
            PendingProduct,
            fields,
            [
                ("", "P", "ambiguous", "open", '{"a": 1}', now, now, 1, ""),
                ("E", "Q", "unknown", "open", '{"b": 2}', now, now, 1, ""),
            ],
            on_conflict=(
                "ON CONFLICT (ean, stock_code) DO UPDATE SET reason = excluded.reason, "
                "payload = excluded.payload, times_seen = {table}.times_seen + 1"
            ),
        )
    p = PendingProduct.objects.get(stock_code="P")
    q = PendingProduct.objects.get(stock_code="Q")
    assert (p.reason, p.times_seen, p.payload) == ("ambiguous", 3, {"a": 1})
    assert (q.ean, q.reason, q.times_seen, q.payload) == ("E", "unknown", 1, {"b": 2})
