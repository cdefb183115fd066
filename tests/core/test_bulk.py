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


@pytest.mark.django_db(transaction=True)
def test_constants_are_set_on_every_row_and_take_part_in_the_comparison(write_path):
    old = timezone.now() - timedelta(days=1)
    posted = timezone.now() - timedelta(hours=1)
    a = ProductFactory(brand="A", posted_at=None, updated_at=old)
    b = ProductFactory(brand="B", posted_at=posted, updated_at=old)
    c = ProductFactory(brand="C", posted_at=old, updated_at=old)
    now = timezone.now()
    with transaction.atomic():
        bulk.bulk_update_rows(
            Product,
            ("brand",),
            [
                (a.pk, "A"),  # only the constant posted_at changes: written
                (b.pk, "B"),  # nothing changes, the constant included: not written
                (c.pk, "C2"),
            ],
            keep_when_null=("posted_at",),
            changed_only=("brand", "posted_at"),
            constants={"posted_at": posted, "updated_at": now},
        )
    for product in (a, b, c):
        product.refresh_from_db()
    assert (a.brand, a.posted_at, a.updated_at) == ("A", posted, now)
    assert (b.brand, b.posted_at, b.updated_at) == ("B", posted, old)
    assert (c.brand, c.posted_at, c.updated_at) == ("C2", posted, now)


@pytest.mark.django_db(transaction=True)
def test_a_null_constant_keeps_the_stored_value_where_asked(write_path):
    old = timezone.now() - timedelta(days=1)
    posted = timezone.now() - timedelta(hours=1)
    a = ProductFactory(brand="A", posted_at=posted, updated_at=old)
    now = timezone.now()
    with transaction.atomic():
        bulk.bulk_update_rows(
            Product,
            ("brand",),
            [(a.pk, "A2")],
            keep_when_null=("posted_at",),
            changed_only=("brand", "posted_at"),
            constants={"posted_at": None, "updated_at": now},
        )
    a.refresh_from_db()
    assert (a.brand, a.posted_at, a.updated_at) == ("A2", posted, now)


@pytest.mark.django_db(transaction=True)
def test_insert_constants_are_stored_on_every_row(write_path):
    from catalog.models import ProductHistory, SyncAudit

    product = ProductFactory()
    audit = SyncAudit.objects.create(
        endpoint="batch", outcome="applied", status_code=200, duration_ms=1
    )
    posted = timezone.now() - timedelta(hours=1)
    now = timezone.now()
    with transaction.atomic():
        bulk.bulk_insert_rows(
            ProductHistory,
            ("product", "field", "old_value", "new_value"),
            [(product.pk, "shop_quantity", str(i), str(i + 1)) for i in range(3)],
            constants={"audit": audit.pk, "changed_at": now, "source": "sync", "posted_at": posted},
        )
    rows = ProductHistory.objects.filter(product=product).order_by("old_value")
    assert [(r.old_value, r.new_value) for r in rows] == [("0", "1"), ("1", "2"), ("2", "3")]
    assert {(r.audit_id, r.changed_at, r.source, r.posted_at) for r in rows} == {
        (audit.pk, now, "sync", posted)
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "codes",
    [
        ["A", "B,C", 'Q"uote', "back\\slash", "{brace}", "sp ace", "ÄÖ"],
        ["A", "sep\x1farated"],  # the separator inside a value: sent as an array
        ["A"],
    ],
)
def test_select_rows_finds_exactly_the_rows_named(codes):
    products = {code: ProductFactory(stock_code=code, ean="") for code in codes}
    ProductFactory(stock_code="OTHER", ean="")
    rows = bulk.select_rows(
        Product, ("id", "stock_code"), where_in=("stock_code", codes), order_by="id"
    )
    assert sorted(rows) == sorted((p.pk, code) for code, p in products.items())
    by_id = bulk.select_rows(
        Product,
        ("stock_code",),
        where_in=("id", [p.pk for p in products.values()]),
        order_by="id",
    )
    assert sorted(row[0] for row in by_id) == sorted(codes)


@pytest.mark.django_db
def test_select_rows_by_an_empty_string():
    product = ProductFactory(stock_code="A", ean="")
    rows = bulk.select_rows(Product, ("id",), where_in=("ean", [""]), order_by="id")
    assert rows == [(product.pk,)]
