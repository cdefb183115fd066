"""A document sent again takes the catalogue fields it compares from the values the worker kept
with each row's version (`sync.catalogue`), and never from a version that is gone."""

from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from catalog.models import Product, ProductHistory
from catalog.schemas import ProductItem
from sync import catalogue
from sync.imports import products_import
from tests.factories import full_item
from tests.partner_api.sync_helpers import post_sync

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

POSTED_AT = "2026-03-02T08:00:00+00:00"
_documents = iter(range(1, 10_000))


@pytest.fixture(autouse=True)
def _nothing_kept():
    catalogue.forget()
    yield
    catalogue.forget()


def _send(client, items, *, posted_at=POSTED_AT):
    """One document of the partner system: a new number, the given time."""
    number = f"DOC-{next(_documents)}"
    response = post_sync(
        client,
        {
            "products": items,
            "request_id": number,
            "sync_context": {
                "source_type": "stock_receipt",
                "source_ref": number,
                "posted_at": posted_at,
            },
        },
    )
    assert response.status_code == 200, response.content
    return response.json()


def _items(count: int, start: int = 0):
    """Items of products in the catalogue (imported as the items say)."""
    items = [full_item(index) for index in range(start, start + count)]
    products_import(items=[ProductItem.model_validate(item) for item in items])
    return items


def _stored(stock_code: str) -> dict:
    return Product.objects.filter(stock_code=stock_code).values().get()


def _raw_update(sql: str, params) -> None:
    """A write made outside the service (SQL typed by hand): it leaves updated_at alone."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_a_document_sent_again_reads_the_catalogue_columns_once(api_client):
    items = _items(60)
    _send(api_client, items)  # the products take the document's time
    _send(api_client, items)  # the same document: its catalogue fields are read and kept
    before = list(Product.objects.order_by("id").values_list("id", "updated_at"))
    history = ProductHistory.objects.count()

    with CaptureQueriesContext(connection) as queries:
        result = _send(api_client, items)

    assert result["products_updated"] == 60 and result["stale_products"] == 0
    assert result["unknown_products"] == 0
    product_reads = [q["sql"] for q in queries if 'FROM "catalog_product"' in q["sql"]]
    # One locked read, of the key, the stock fields and the version; no catalogue column.
    assert len(product_reads) == 1, product_reads
    assert "xmin" in product_reads[0] and '"brand"' not in product_reads[0]
    # Nothing was written.
    assert list(Product.objects.order_by("id").values_list("id", "updated_at")) == before
    assert ProductHistory.objects.count() == history
    assert len(catalogue._kept) == 60


@pytest.mark.parametrize(
    ("column", "stored"),
    [
        ("name", "Renamed by hand"),
        ("brand", None),
        ("run_on_flat", True),
        ("weight_kg", Decimal("1.0000")),
        ("eu_label", ""),
    ],
)
def test_a_row_written_outside_the_service_is_read_again(api_client, column, stored):
    items = _items(3)
    _send(api_client, items)
    _send(api_client, items)  # kept
    _raw_update(
        f'UPDATE catalog_product SET "{column}" = %s WHERE stock_code = %s',
        [stored, items[1]["stock_code"]],
    )
    updated_at = _stored(items[1]["stock_code"])["updated_at"]

    _send(api_client, items)

    # The document's value is written back: the kept one belonged to a version that is gone.
    row = _stored(items[1]["stock_code"])
    sent = items[1][column]
    assert row[column] == (Decimal(str(sent)) if column == "weight_kg" else sent)
    assert row["updated_at"] > updated_at
    # The others were not written.
    assert _stored(items[0]["stock_code"])["updated_at"] < row["updated_at"]


def test_a_write_through_the_orm_or_the_service_is_seen_too(api_client):
    items = _items(2)
    _send(api_client, items)
    _send(api_client, items)  # kept
    Product.objects.filter(stock_code=items[0]["stock_code"]).update(name="Edited in the admin")
    # The service itself writes a new version: the next document holds another name.
    renamed = [{**items[1], "name": "Renamed by the partner"}, items[0]]
    _send(api_client, renamed)

    _send(api_client, items)

    assert _stored(items[0]["stock_code"])["name"] == items[0]["name"]
    assert _stored(items[1]["stock_code"])["name"] == items[1]["name"]


def test_in_an_outer_transaction_nothing_kept_is_used(api_client):
    """One transaction writes all its versions of a row under one id: a value read from the
    first may not stand for the second."""
    items = _items(1)
    _send(api_client, items)
    code = items[0]["stock_code"]
    sent_name = items[0]["name"]
    with transaction.atomic():
        _raw_update("UPDATE catalog_product SET name = %s WHERE stock_code = %s", [sent_name, code])
        _send(api_client, items)  # nothing changes
        _raw_update("UPDATE catalog_product SET name = %s WHERE stock_code = %s", ["Other", code])
        _send(api_client, items)

    assert _stored(code)["name"] == sent_name


def test_a_batch_of_products_that_hold_other_times_and_kept_or_not(api_client):
    """Products that hold the document's time (kept, or not yet) beside products that hold an
    earlier one, a later one and none: each gets what the full read gives it."""
    items = _items(8)
    _send(api_client, items, posted_at="2026-03-01T08:00:00+00:00")
    _send(api_client, items[:4])  # 0-3 hold POSTED_AT
    _send(api_client, items[:2])  # 0-1 kept
    _send(api_client, [items[6]], posted_at="2026-03-03T08:00:00+00:00")  # 6: later
    _raw_update(
        "UPDATE catalog_product SET posted_at = NULL WHERE stock_code = %s",
        [items[7]["stock_code"]],
    )
    changed = [
        {**item, "brand": f"Brand {index}"} if index % 2 else item
        for index, item in enumerate(items)
    ]
    before = {item["stock_code"]: _stored(item["stock_code"]) for item in items}

    result = _send(api_client, changed)

    assert result["products_updated"] == 7 and result["stale_products"] == 1
    assert [key["index"] for key in result["stale_keys"]] == [6]
    for index, item in enumerate(changed):
        row = _stored(item["stock_code"])
        if index == 6:
            assert row == before[item["stock_code"]]
            continue
        assert row["brand"] == item["brand"]
        written = index % 2 or index >= 4  # a new brand, or a new time (4, 5, 7)
        assert (row["updated_at"] > before[item["stock_code"]]["updated_at"]) == bool(written), (
            index
        )


def test_the_values_kept_are_bounded(api_client, monkeypatch):
    monkeypatch.setattr(catalogue, "KEPT_PRODUCTS", 5)
    items = _items(4)
    more = _items(4, start=4)
    _send(api_client, items)
    _send(api_client, items)
    assert len(catalogue._kept) == 4
    _send(api_client, more)
    _send(api_client, more)  # 4 more would make 8: emptied first
    assert sorted(catalogue._kept) == sorted(
        Product.objects.filter(stock_code__in=[i["stock_code"] for i in more]).values_list(
            "id", flat=True
        )
    )
    # Still right for the products no longer kept.
    _raw_update(
        "UPDATE catalog_product SET name = 'x' WHERE stock_code = %s", [items[0]["stock_code"]]
    )
    _send(api_client, items)
    assert _stored(items[0]["stock_code"])["name"] == items[0]["name"]


def test_a_new_connection_to_the_same_database_keeps_them(api_client):
    items = _items(2)
    _send(api_client, items)
    _send(api_client, items)
    assert len(catalogue._kept) == 2
    connection.close()

    with CaptureQueriesContext(connection) as queries:
        _send(api_client, items)
        _send(api_client, items)

    assert len(catalogue._kept) == 2
    product_reads = [q["sql"] for q in queries if 'FROM "catalog_product"' in q["sql"]]
    assert len(product_reads) == 2, product_reads  # the locked reads alone
    # The database is asked for once on a connection.
    assert sum("pg_postmaster_start_time" in q["sql"] for q in queries) == 1


def test_a_connection_to_another_database_empties_them(api_client):
    items = _items(2)
    _send(api_client, items)
    _send(api_client, items)
    assert len(catalogue._kept) == 2
    # As if the values had been read from a server that has since been replaced.
    catalogue._database[0] = ("2020-01-01 00:00:00+00", 1)
    connection.close()
    _raw_update(
        "UPDATE catalog_product SET name = 'x' WHERE stock_code = %s", [items[0]["stock_code"]]
    )

    _send(api_client, items[1:])

    assert list(catalogue._kept) == [_stored(items[1]["stock_code"])["id"]]


def test_emptied_while_some_of_a_batch_is_kept(api_client, monkeypatch):
    monkeypatch.setattr(catalogue, "KEPT_PRODUCTS", 5)
    items = _items(2)
    more = _items(4, start=2)
    for document in (items, items, more, more):
        _send(api_client, document)
    _raw_update(
        "UPDATE catalog_product SET name = 'x' WHERE stock_code = %s", [more[1]["stock_code"]]
    )
    before = _stored(more[0]["stock_code"])

    # more[0] kept, more[1] a gone version, items not kept: three to read make 7, emptied.
    _send(api_client, more[:2] + items)

    assert _stored(more[1]["stock_code"])["name"] == more[1]["name"]
    assert _stored(more[0]["stock_code"]) == before
    assert len(catalogue._kept) == 3


def test_nothing_is_kept_longer_than_its_time(api_client, monkeypatch):
    items = _items(2)
    _send(api_client, items)
    _send(api_client, items)
    assert len(catalogue._kept) == 2
    monkeypatch.setattr(catalogue, "KEPT_SECONDS", 0.0)
    _send(api_client, items[:1])  # emptied first, then the one read kept
    assert list(catalogue._kept) == [_stored(items[0]["stock_code"])["id"]]
