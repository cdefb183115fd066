"""`snapshot` against the service itself: a 12,000-row file in three parts, the connector's
process killed (SIGKILL) right after the second part's answer and run again, counts every row
once and commits; a held commit exits 6 naming its reasons and count, and `--confirm-absent N`
then zeroes exactly those levels."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from catalog.models import Product
from connector.cli import main
from stock.models import StockLevel, StockMovement, StockSnapshot, Warehouse
from tests.connector.test_ship import ServiceTransport
from tests.factories import ProductFactory, levels_like_products

ROOT = Path(__file__).resolve().parents[2]
POSTED = "2026-03-02T18:00:00+01:00"
HEAD = "document_number,document_type,document_state,document_posted_at,stock_code,status,"
HEAD += "shop_quantity,catalog_price,eshop_price\n"

# The connector, in a process of its own, that kills itself with SIGKILL as soon as it has
# read the service's answer to the second part: nothing after that answer runs.
DYING_CONNECTOR = textwrap.dedent(
    """
    import os, signal, sys
    from connector.cli import main
    from connector.transport import HttpTransport

    class Dying(HttpTransport):
        parts = 0

        def request(self, method, url, **kwargs):
            reply = super().request(method, url, **kwargs)
            if url.endswith("/items") and reply.status == 200:
                Dying.parts += 1
                if Dying.parts == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
            return reply

    sys.exit(main(sys.argv[1:], transport=Dying()))
    """
)


def stock_file(path: Path, codes: list[str]) -> str:
    lines = [
        f"ST-9,adjustment,posted,{POSTED},{code},active,{i % 7 + 1},100,90\n"
        for i, code in enumerate(codes)
    ]
    path.write_text(HEAD + "".join(lines), encoding="utf-8")
    return str(path)


def connector(args: list[str], env: dict[str, str], *, dying: bool = False):
    command = (
        [sys.executable, "-c", DYING_CONNECTOR] if dying else [sys.executable, "-m", "connector"]
    )
    return subprocess.run(
        [*command, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.django_db(transaction=True)
def test_killed_after_the_second_part_the_rerun_counts_each_row_once(
    live_server, api_key, tmp_path
):
    codes = [f"SN-{i:05d}" for i in range(12_000)]
    products = Product.objects.bulk_create(
        Product(
            stock_code=code,
            ean=f"859{i:010d}",
            name=f"Tyre {code}",
            status="active",
            shop_quantity=0,
            catalog_price=Decimal(100),
            eshop_price=Decimal(90),
        )
        for i, code in enumerate(codes)
    )
    levels_like_products(products)
    path = stock_file(tmp_path / "count.csv", codes)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CONNECTOR_")},
        "PYTHONPATH": str(ROOT),
        "CONNECTOR_BASE_URL": live_server.url,
        "CONNECTOR_API_KEY": api_key,
    }
    args = ["snapshot", path, "--warehouse", "MAIN", "--no-progress", "--snapshot-id", "COUNT-1"]

    killed = connector(args, env, dying=True)

    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    snapshot = StockSnapshot.objects.get(snapshot_id="COUNT-1")
    assert (snapshot.state, snapshot.received_items, snapshot.declared_items) == (
        "open",
        10_000,
        12_000,
    )

    rerun = connector(args, env)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr[-2000:]
    assert "resumed: state open, received 10000 of 12000 declared" in rerun.stdout
    assert rerun.stdout.count(", replayed") == 2
    assert "part 3 of 3: 2000 rows, HTTP 200, updated 2000" in rerun.stdout
    snapshot.refresh_from_db()
    assert (snapshot.received_items, snapshot.declared_items) == (12_000, 12_000)
    assert (snapshot.state, snapshot.held_reasons, snapshot.absent) == ("committed", [], 0)
    main_levels = StockLevel.objects.filter(warehouse__code="MAIN", product__stock_code__in=codes)
    assert sorted(main_levels.values_list("quantity", flat=True)) == sorted(
        i % 7 + 1 for i in range(12_000)
    )
    # Each level was set once, by a part applied once.
    assert StockMovement.objects.filter(snapshot=snapshot, kind="quantity").count() == 12_000


def run(args, transport):
    out, err = io.StringIO(), io.StringIO()
    code = main(args, transport=transport, stdout=out, stderr=err, sleep=lambda _: None)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_a_held_commit_exits_6_then_confirm_absent_zeroes_those_levels(
    tmp_path, monkeypatch, api_key
):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test")
    monkeypatch.setenv("CONNECTOR_API_KEY", api_key)
    named = [ProductFactory(stock_code=f"N-{i}") for i in range(3)]
    gone = [ProductFactory(stock_code=f"G-{i}", shop_quantity=i + 1) for i in range(4)]
    path = stock_file(tmp_path / "take.csv", [p.stock_code for p in named])
    transport = ServiceTransport()
    args = ["snapshot", path, "--warehouse", "MAIN", "--no-progress"]

    code, stdout, _ = run(args, transport)

    assert code == 6, stdout
    assert "the commit is held (too_many_absent): 4 absent level(s) would be set to 0" in stdout
    assert "absent: G-0, ean " in stdout and "quantity 1" in stdout
    assert "--confirm-absent 4" in stdout
    snapshot = StockSnapshot.objects.get()
    assert (snapshot.state, snapshot.absent, snapshot.held_reasons) == (
        "held",
        4,
        ["too_many_absent"],
    )
    assert snapshot.snapshot_id.startswith("MAIN.")
    main_wh = Warehouse.objects.get(code="MAIN")
    assert StockLevel.objects.get(product=gone[3], warehouse=main_wh).quantity == 4

    code, stdout, _ = run([*args, "--confirm-absent", "3"], transport)
    assert code == 6 and "--confirm-absent 3 does not match the 4 absent level(s)" in stdout
    assert StockLevel.objects.get(product=gone[3], warehouse=main_wh).quantity == 4

    code, stdout, _ = run([*args, "--confirm-absent", "4"], transport)

    assert code == 0, stdout
    assert "resumed: state held" in stdout and ", replayed" in stdout
    assert "committed: 4 absent levels set to 0 (confirmed over: too_many_absent)" in stdout
    snapshot.refresh_from_db()
    assert (snapshot.state, snapshot.absent, snapshot.received_items) == ("committed", 4, 3)
    assert [StockLevel.objects.get(product=p, warehouse=main_wh).quantity for p in gone] == [
        0,
        0,
        0,
        0,
    ]
    assert StockMovement.objects.filter(snapshot=snapshot, reason="snapshot_absent").count() == 4
    assert [StockLevel.objects.get(product=p, warehouse=main_wh).quantity for p in named] == [
        1,
        2,
        3,
    ]


@pytest.mark.django_db
def test_the_services_refusals_are_named(tmp_path, monkeypatch, api_key):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test")
    monkeypatch.setenv("CONNECTOR_API_KEY", api_key)
    ProductFactory(stock_code="N-0")
    transport = ServiceTransport()
    path = stock_file(tmp_path / "take.csv", ["N-0"])
    args = ["snapshot", path, "--no-progress", "--snapshot-id", "R-1"]
    assert run([*args, "--warehouse", "MAIN"], transport)[0] == 0

    # The id again for another file: 409 naming the id; nothing sent after the opening.
    other = stock_file(tmp_path / "other.csv", ["N-0", "N-1"])
    calls = len(transport.calls)
    code, stdout, _ = run(
        ["snapshot", other, "--no-progress", "--snapshot-id", "R-1", "--warehouse", "MAIN"],
        transport,
    )
    assert code == 3
    assert "open refused: snapshot R-1 was opened with other values" in stdout
    assert len(transport.calls) == calls + 1

    # A warehouse the service has none of: its 422 named.
    code, stdout, _ = run(
        ["snapshot", path, "--no-progress", "--snapshot-id", "R-2", "--warehouse", "NOWHERE"],
        transport,
    )
    assert code == 3 and "open refused: HTTP 422: body.warehouse" in stdout
    assert not StockSnapshot.objects.filter(snapshot_id="R-2").exists()

    # An abandoned snapshot is not resumed: nothing is sent after the opening.
    opened = {"snapshot_id": "R-3", "warehouse": "MAIN", "posted_at": POSTED, "declared_items": 1}
    client = transport.client
    url = "/api/v1/partner/stock/snapshots"
    assert client.post(url, opened, "application/json", HTTP_X_API_KEY=api_key).status_code == 201
    assert client.delete(f"{url}/R-3", HTTP_X_API_KEY=api_key).status_code == 200
    calls = len(transport.calls)
    code, stdout, _ = run(
        ["snapshot", path, "--no-progress", "--snapshot-id", "R-3", "--warehouse", "MAIN"],
        transport,
    )
    assert code == 3 and "snapshot R-3 is abandoned" in stdout
    assert len(transport.calls) == calls + 1
