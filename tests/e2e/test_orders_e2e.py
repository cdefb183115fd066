"""The reference connector taking a real backlog of orders from the real service (gunicorn,
PostgreSQL): pull in pages, acknowledge from a CSV, and a proxy that loses answers on the way."""

import csv
import json
import os

import pytest

from connector.orders import order_file_name
from tests.e2e.live_service import LossyProxy, live_service

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

BACKLOG = 3000
LOSSY_BACKLOG = 300


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("e2e_orders")
    with live_service(os.environ["DATABASE_URL"], workdir) as live:
        yield live


def seed_orders(live, *, prefix: str, count: int, day: int) -> None:
    """`count` pending orders with two items each, one second apart, in two bulk inserts. Every
    250th number has a "/" and upper case, so some file names need the safe form."""
    live.django(
        "from datetime import datetime, timedelta, timezone\n"
        "from decimal import Decimal\n"
        "from orders.models import Order, OrderItem\n"
        f"start = datetime(2026, 3, {day}, tzinfo=timezone.utc)\n"
        "orders = Order.objects.bulk_create([Order("
        f"order_number=('WEB/{prefix}/%05d' if n % 250 == 0 else '{prefix.lower()}-%05d') % n,"
        " created_at=start + timedelta(seconds=n // 2), status='paid',"
        " customer_name='Customer %d' % n, customer_email='c%d@example.com' % n,"
        " subtotal=Decimal('200'), vat_total=Decimal('42'), total=Decimal('242'),"
        f" partner_sync_status='pending_partner') for n in range({count})], batch_size=1000)\n"
        "OrderItem.objects.bulk_create([OrderItem(order=o, name='Tyre %d' % line, quantity=2,"
        " unit_price=Decimal('50'), total=Decimal('100'), ean='859000000000%d' % line,"
        " stock_code='SC-%d' % line) for o in orders for line in range(2)], batch_size=2000)\n"
    )


def partner_state(live, numbers_like: str) -> dict[int, tuple]:
    rows = live.query(
        "SELECT id, partner_sync_status, partner_reference, acknowledged_at FROM orders_order "
        "WHERE order_number ILIKE %s",
        (numbers_like,),
    )
    return {row[0]: row[1:] for row in rows}


def write_ack_csv(path, folder, reference=lambda record: f"FA-{record['order_id']}"):
    """What the ERP's import writes: one line per order file it booked."""
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["order_id", "order_number", "partner_reference"])
        for file in sorted(folder.iterdir()):
            record = json.loads(file.read_text(encoding="utf-8"))
            writer.writerow([record["order_id"], record["order_number"], reference(record)])
    return str(path)


def test_a_backlog_is_pulled_in_pages_and_acknowledged(service, tmp_path):
    seed_orders(service, prefix="BL", count=BACKLOG, day=1)
    inbox = tmp_path / "inbox"
    status_file = tmp_path / "pull.json"

    pulled = service.connector(
        "orders", "pull", "--out", str(inbox), "--status-file", str(status_file)
    )

    assert pulled.returncode == 0, pulled.stdout[-2000:] + pulled.stderr
    assert f"Pulled {BACKLOG} order(s) in 30 page(s): {BACKLOG} written" in pulled.stdout
    assert pulled.stdout.count("wrote ") == BACKLOG
    status = json.loads(status_file.read_text())
    assert (status["outcome"], status["pages"], status["written"]) == ("done", 30, BACKLOG)
    records = [json.loads(path.read_text(encoding="utf-8")) for path in inbox.iterdir()]
    pending = partner_state(service, "%BL%")
    assert sorted(r["order_id"] for r in records) == sorted(pending)
    assert all(inbox.joinpath(order_file_name(r["order_number"])).exists() for r in records)
    assert all(len(r["items"]) == 2 for r in records)

    again = service.connector("orders", "pull", "--out", str(inbox))

    assert again.returncode == 0, again.stdout[-2000:] + again.stderr
    assert "wrote " not in again.stdout
    assert f"0 written, {BACKLOG} already there" in again.stdout

    booked = write_ack_csv(tmp_path / "booked.csv", inbox)
    acked = service.connector("orders", "ack", booked, "--status-file", str(tmp_path / "ack.json"))

    assert acked.returncode == 0, acked.stdout[-2000:] + acked.stderr
    assert f"{BACKLOG} acknowledged, 0 repeat, 0 conflict" in acked.stdout
    state = partner_state(service, "%BL%")
    assert all(
        status == "acknowledged" and reference == f"FA-{order_id}"
        for order_id, (status, reference, _) in state.items()
    )

    repeated = service.connector(
        "orders", "ack", booked, "--status-file", str(tmp_path / "ack.json")
    )

    assert repeated.returncode == 0, repeated.stdout[-2000:] + repeated.stderr
    assert f"0 acknowledged, {BACKLOG} repeat" in repeated.stdout
    assert json.loads((tmp_path / "ack.json").read_text())["repeat"] == BACKLOG
    assert partner_state(service, "%BL%") == state

    first_id = min(state)
    conflicting = tmp_path / "conflict.csv"
    conflicting.write_text(f"order_id,partner_reference\n{first_id},FA-OTHER\n", encoding="utf-8")
    conflict = service.connector("orders", "ack", str(conflicting))

    assert conflict.returncode == 1, conflict.stdout + conflict.stderr
    assert (
        f"order {first_id}: conflict: the service holds partner_reference 'FA-{first_id}', "
        "the file says 'FA-OTHER'" in conflict.stdout
    )
    assert partner_state(service, "%BL%")[first_id] == state[first_id]

    empty = service.connector("orders", "pull", "--out", str(tmp_path / "empty"))
    assert empty.returncode == 0
    assert "Pulled 0 order(s) in 1 page(s)" in empty.stdout


def test_answers_lost_by_a_proxy_lose_and_duplicate_nothing(service, tmp_path):
    seed_orders(service, prefix="LP", count=LOSSY_BACKLOG, day=20)
    upstream_port = int(service.base_url.rsplit(":", 1)[1])
    inbox = tmp_path / "inbox"

    # The answer to page 2 is lost once, after the service answered it.
    with LossyProxy(upstream_port, drop={2}) as proxy:
        pulled = service.connector(
            "orders", "pull", "--out", str(inbox), "--backoff", "0.2", base_url=proxy.base_url
        )

    assert pulled.returncode == 0, pulled.stdout[-2000:] + pulled.stderr
    assert proxy.dropped == 1
    assert proxy.requests == 4
    assert "page 2: RemoteDisconnected" in pulled.stderr
    assert f"Pulled {LOSSY_BACKLOG} order(s) in 3 page(s): {LOSSY_BACKLOG} written" in pulled.stdout
    records = [json.loads(path.read_text(encoding="utf-8")) for path in inbox.iterdir()]
    assert sorted(r["order_id"] for r in records) == sorted(partner_state(service, "%LP%"))

    booked = write_ack_csv(tmp_path / "booked.csv", inbox)
    # The answers to the 2nd and the 150th acknowledgement are lost after the service applied them.
    with LossyProxy(upstream_port, drop={2, 150}) as proxy:
        acked = service.connector(
            "orders", "ack", booked, "--backoff", "0.2", base_url=proxy.base_url
        )

    assert acked.returncode == 0, acked.stdout[-2000:] + acked.stderr
    assert proxy.dropped == 2
    assert proxy.requests == LOSSY_BACKLOG + 2
    # The retry of a lost acknowledgement finds it done: a repeat, not a second acknowledgement.
    assert f"{LOSSY_BACKLOG - 2} acknowledged, 2 repeat, 0 conflict" in acked.stdout
    state = partner_state(service, "%LP%")
    assert len(state) == LOSSY_BACKLOG
    assert all(
        status == "acknowledged" and reference == f"FA-{order_id}"
        for order_id, (status, reference, _) in state.items()
    )
