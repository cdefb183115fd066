"""The snapshot benchmark (`tests/bench/snapshots.py`) measures what it says: its pairs send a
part and a batch that apply the same items, the warehouse it loads in SQL is the one the
service's commit then zeroes, a part leaves a level as its loading does, and its checks catch
a commit that did not do its work."""

import io
import json
from contextlib import redirect_stdout
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection
from rest_framework.test import APIClient

from catalog.schemas import ProductItem
from stock.models import StockLevel, StockMovement, StockSnapshot
from sync.imports import products_import
from tests.bench import snapshots
from tests.bench.catalogue_size import Shape
from tests.bench.run import batch_body, full_item
from tests.bench.shop_http import open_booked_reservations
from tests.factories import full_item as populated_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

POSTED_AT = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
IMPORTED, PRODUCTS, ABSENT, RESERVED = 10, 200, 15, 2


@pytest.fixture
def conninfo():
    """The test database as a psycopg connection string; the harness's tables dropped after."""
    params = connection.get_connection_params()
    info = psycopg.conninfo.make_conninfo(
        **{k: params[k] for k in ("dbname", "user", "password", "host", "port") if params.get(k)}
    )
    yield info
    with psycopg.connect(info, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {snapshots.ABSENT}, {snapshots.MANIFEST}")


class InProcess:
    """The harness's `Server` answered by Django's test client."""

    def __init__(self, key: str):
        self.client = APIClient()
        self.client.credentials(HTTP_X_API_KEY=key)

    def request(self, method: str, path: str, body: bytes | None = None):
        response = self.client.generic(method, path, body or b"", content_type="application/json")
        return response.status_code, dict(response.headers), response.content


def imported(count: int) -> None:
    products_import(items=[ProductItem.model_validate(full_item(i, 1)) for i in range(count)])


@pytest.fixture
def warehouse(conninfo) -> int:
    """The commit's warehouse as the harness builds it, small; the number of named levels."""
    imported(IMPORTED)
    with psycopg.connect(conninfo, autocommit=True) as conn, redirect_stdout(io.StringIO()):
        snapshots.products(conn, Shape(PRODUCTS), IMPORTED)
        snapshots.history(conn)
    open_booked_reservations(RESERVED, booked_at=POSTED_AT - timedelta(minutes=1))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return snapshots.mark_named(conn, absent=ABSENT, reserved=RESERVED, posted_at=POSTED_AT)


def test_the_loaded_warehouse_is_what_the_commit_zeroes(warehouse, conninfo, api_key):
    server = InProcess(api_key)
    snapshots.opened(server, conninfo, {"posted_at": POSTED_AT, "named": warehouse})
    assert StockSnapshot.objects.get().received_items == warehouse == PRODUCTS - ABSENT
    before = snapshots.state(conninfo, POSTED_AT)
    assert before["absent left"] == ABSENT and before["booked reservations open"] == RESERVED
    status, _, payload = server.request(
        "POST", f"{snapshots.SNAPSHOTS}/{snapshots.SNAPSHOT_ID}/commit", b"{}"
    )
    assert status == 200, payload
    answer = json.loads(payload)
    assert (answer["state"], answer["absent"]) == ("committed", ABSENT)
    after = snapshots.state(conninfo, POSTED_AT)
    assert snapshots.check(before, after, answer, ABSENT) == []
    assert StockMovement.objects.filter(reason="snapshot_absent").count() == ABSENT
    # The checks fail for the state before the commit and for an answer that was not it.
    problems = snapshots.check(before, before, {"state": "open", "absent": None}, ABSENT)
    assert [p.split(":")[0] for p in problems] == [
        "zeroed",
        "movements",
        "absent left",
        "booked reservations open",
        "absent products selling",
        "answer",
    ]


def test_a_part_leaves_a_level_as_the_loading_leaves_a_named_one(warehouse, conninfo, api_key):
    """A real part naming one absent product with its figure: the level takes the snapshot's
    time, as the loading set every named level's (and the product's), and it is no longer
    absent."""
    server = InProcess(api_key)
    snapshots.opened(server, conninfo, {"posted_at": POSTED_AT, "named": warehouse + 1})
    with psycopg.connect(conninfo) as conn:
        product_id = conn.execute(
            f"SELECT product_id FROM {snapshots.ABSENT} ORDER BY product_id DESC LIMIT 1"
        ).fetchone()[0]
    level = StockLevel.objects.select_related("product").get(product_id=product_id)
    named = StockLevel.objects.select_related("product").filter(
        posted_at=POSTED_AT, product__stock_code__contains="/"
    )[0]
    item = populated_item(
        0,
        stock_code=level.product.stock_code,
        ean=level.product.ean,
        shop_quantity=level.quantity,
    )
    body = {
        "products": [item],
        "request_id": "PART-1",
        "sync_context": {"source_type": "stock_adjustment", "posted_at": POSTED_AT.isoformat()},
    }
    status, _, payload = server.request(
        "POST", f"{snapshots.SNAPSHOTS}/{snapshots.SNAPSHOT_ID}/items", json.dumps(body).encode()
    )
    assert status == 200, payload
    parted = StockLevel.objects.select_related("product").get(pk=level.pk)
    assert (parted.quantity, parted.posted_at) == (level.quantity, POSTED_AT)
    assert parted.product.posted_at == named.product.posted_at == named.posted_at == POSTED_AT
    assert snapshots.state(conninfo, POSTED_AT)["absent left"] == ABSENT - 1


def test_the_pairs_apply_the_same_items_as_a_part_and_as_a_batch(conninfo, api_key):
    imported(30)
    bench = snapshots.PartBench(InProcess(api_key), size=30, url=conninfo)
    times = bench.pairs(1)
    assert [len(times["part"]), len(times["sync"])] == [1, 1]
    # Two warm-up pairs and the timed one: three parts, each of a snapshot abandoned after it.
    assert set(StockSnapshot.objects.values_list("state", "received_items")) == {("abandoned", 30)}
    assert StockSnapshot.objects.count() == 3
    assert StockMovement.objects.filter(snapshot__isnull=False).count() == 3 * 30
    last = json.loads(batch_body(30, 15, request_id="x"))["products"]
    assert sorted(StockLevel.objects.values_list("quantity", flat=True)) == sorted(
        item["shop_quantity"] for item in last
    )
    # A batch that does not update every product it names (an unknown item; here also stale
    # items, its document times being no later than the last pair's) stops the run.
    wrong = snapshots.PartBench(InProcess(api_key), size=31, url=conninfo)
    with pytest.raises(SystemExit, match=r"^sync: \d+ updated, \d+ movements, not 31$"):
        wrong.send("sync", "WRONG-1")


def test_the_placement_pools_hold_stock_and_keep_apart(warehouse, conninfo):
    found = snapshots.pools(conninfo, clients=2, each=5)
    with psycopg.connect(conninfo) as conn:
        absent_codes = {
            row[0]
            for row in conn.execute(
                f"SELECT p.stock_code FROM catalog_product p JOIN {snapshots.ABSENT} a "
                "ON a.product_id = p.id"
            )
        }
    untouched = [code for pool in found["untouched"] for code, _ in pool]
    touched = [code for pool in found["touched"] for code, _ in pool]
    assert len(untouched) == len(set(untouched)) == 10 and not set(untouched) & absent_codes
    assert len(touched) == len(set(touched)) == 10 and set(touched) <= absent_codes
    assert not {code for code, _ in found["warm"][0]} & set(untouched)
    levels = StockLevel.objects.filter(product__stock_code__in=untouched + touched)
    assert all(level.quantity - level.reserved >= 1 for level in levels)
