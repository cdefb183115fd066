"""A batch's history rows are the same whether the database writes them (many rows, on
PostgreSQL: from the temporary table beside the locked rows) or Python does (a few rows, and
every write on SQLite); so are its quantity changes, recorded as the level's stock movements."""

from decimal import Decimal

import pytest

from catalog.models import ProductHistory, SyncAudit
from core import bulk
from stock.models import StockMovement
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db

# (stored, sent) for each tracked field: unchanged in value but not in spelling, changed,
# extreme values and zero.
CASES = [
    {"shop_quantity": (5, 5), "catalog_price": ("10", 10.0), "eshop_price": ("9.5", "9.50")},
    {"shop_quantity": (5, -3), "catalog_price": ("10", 10.5), "eshop_price": ("9.5", 0)},
    {"shop_quantity": (0, 2**31 - 1), "catalog_price": ("0", "99999999.9999")},
    {"shop_quantity": (-7, 0), "eshop_price": ("0.0001", "100"), "status": ("active", "sold")},
    {"catalog_price": ("120.5", 1e2), "eshop_price": ("100", 99.99), "status": ("a", "a")},
    {"catalog_price": ("1.2300", "1.23"), "eshop_price": ("12345", "12345.0001")},
]


# What `item` sends for a tracked field the case does not name: stored the same, unchanged.
DEFAULTS = {"shop_quantity": 5, "catalog_price": "100", "eshop_price": "90", "status": "active"}


def _sync(api_client, prefix: str) -> None:
    products = []
    for index, case in enumerate(CASES * 10):
        stored = {**DEFAULTS, **{name: pair[0] for name, pair in case.items()}}
        code = f"{prefix}-{index:03d}"
        ProductFactory(
            stock_code=code,
            ean="",
            **{
                name: Decimal(value) if name.endswith("price") else value
                for name, value in stored.items()
            },
        )
        products.append(item(code, **{name: pair[1] for name, pair in case.items()}))
    response = post_sync(
        api_client,
        {
            "products": products,
            "sync_context": {"source_type": "manual", "posted_at": "2026-01-01T08:00:00Z"},
        },
    )
    assert response.status_code == 200, response.json()


def _history(prefix: str) -> list[tuple]:
    return list(
        ProductHistory.objects.filter(product__stock_code__startswith=prefix)
        .order_by("product__stock_code", "field")
        .values_list("product__stock_code", "field", "old_value", "new_value", "source")
    )


def _movements(prefix: str) -> list[tuple]:
    return list(
        StockMovement.objects.filter(
            product__stock_code__startswith=prefix, kind=StockMovement.Kind.QUANTITY
        )
        .order_by("product__stock_code")
        .values_list("product__stock_code", "before", "after", "reason", "warehouse__code")
    )


def test_history_is_the_same_on_both_paths(api_client, monkeypatch):
    monkeypatch.setattr(bulk, "COPY_THRESHOLD", 1)
    _sync(api_client, "T")
    monkeypatch.setattr(bulk, "COPY_THRESHOLD", 10**9)
    _sync(api_client, "R")
    by_table, by_rows = _history("T"), _history("R")
    assert [(code[1:], *rest) for code, *rest in by_table] == [
        (code[1:], *rest) for code, *rest in by_rows
    ]
    moved_by_table, moved_by_rows = _movements("T"), _movements("R")
    assert [(code[1:], *rest) for code, *rest in moved_by_table] == [
        (code[1:], *rest) for code, *rest in moved_by_rows
    ]
    # The same value spelled otherwise is no change; a change is written without trailing zeros.
    # A quantity's change is the default level's movement, before and after as integers.
    assert [row[1:4] for row in by_rows if row[0] == "R-000"] == []
    assert [row[1:] for row in moved_by_rows if row[0] == "R-000"] == []
    assert [row[1:4] for row in by_rows if row[0] == "R-001"] == [
        ("catalog_price", "10", "10.5"),
        ("eshop_price", "9.5", "0"),
    ]
    assert [row[1:] for row in moved_by_rows if row[0] == "R-001"] == [(5, -3, "sync", "MAIN")]
    assert [row[1:4] for row in by_rows if row[0] == "R-002"] == [
        ("catalog_price", "0", "99999999.9999"),
    ]
    assert [row[1:] for row in moved_by_rows if row[0] == "R-002"] == [
        (0, 2147483647, "sync", "MAIN")
    ]
    assert [row[1:4] for row in by_rows if row[0] == "R-003"] == [
        ("eshop_price", "0.0001", "100"),
        ("status", "active", "sold"),
    ]
    assert [row[1:] for row in moved_by_rows if row[0] == "R-003"] == [(-7, 0, "sync", "MAIN")]
    assert [row[1:4] for row in by_rows if row[0] == "R-004"] == [
        ("catalog_price", "120.5", "100"),
        ("eshop_price", "100", "99.99"),
    ]
    assert [row[1:] for row in moved_by_rows if row[0] == "R-004"] == []
    # Eleven changes in each run of the cases: eight of prices and status, three of quantity.
    assert len(by_rows) == 10 * 8
    assert len(moved_by_rows) == 10 * 3
    audits = list(SyncAudit.objects.filter(outcome="applied").order_by("id"))
    for prefix, audit in zip("TR", audits, strict=True):
        rows = ProductHistory.objects.filter(product__stock_code__startswith=prefix)
        assert {(r.audit_id, r.posted_at.isoformat()) for r in rows} == {
            (audit.pk, "2026-01-01T08:00:00+00:00")
        }
        assert len({r.changed_at for r in rows}) == 1
        movements = StockMovement.objects.filter(
            product__stock_code__startswith=prefix, kind=StockMovement.Kind.QUANTITY
        )
        assert {(m.sync_audit_id, m.request_id, m.posted_at.isoformat()) for m in movements} == {
            (audit.pk, audit.request_id, "2026-01-01T08:00:00+00:00")
        }
        assert len({m.created_at for m in movements}) == 1
