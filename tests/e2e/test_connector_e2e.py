"""The reference connector driving the real service (gunicorn, PostgreSQL) as the partner would."""

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.live_service import LossyProxy, live_service

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

RECEIPT_ROWS = 12_000


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("e2e_connector")
    with live_service(os.environ["DATABASE_URL"], workdir) as live:
        seed_products(live, prefix="RC", count=RECEIPT_ROWS)
        seed_products(live, prefix="SM", count=40)
        yield live


def seed_products(live, *, prefix: str, count: int) -> None:
    """Products <prefix>-00000 … with quantity 0, created through the ORM in one bulk insert,
    each with its level in the default warehouse (as every product the service makes has)."""
    live.django(
        "from decimal import Decimal\n"
        "from catalog.models import Product\n"
        "from tests.factories import levels_like_products\n"
        "levels_like_products(Product.objects.bulk_create(["
        f"Product(stock_code='{prefix}-%05d' % i, ean='', status='active', shop_quantity=0,"
        " catalog_price=Decimal('100'), eshop_price=Decimal('90'))"
        f" for i in range({count})], batch_size=2000))\n"
    )


def row(code: str, quantity: int) -> dict:
    return {
        "stock_code": code,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100,
        "eshop_price": 90,
    }


def write_document(tmp_path, number, rows, *, type="receipt", state="posted", posted_at=None):
    path = tmp_path / f"{number}.json"
    document = {"number": number, "type": type, "state": state, "rows": rows}
    if posted_at is not None:
        document["posted_at"] = posted_at
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def audits(live, request_id):
    return live.query(
        "SELECT outcome, note, source_type, products_received, products_updated, "
        "unknown_products FROM catalog_syncaudit WHERE request_id = %s ORDER BY id",
        (request_id,),
    )


def quantities(live, codes):
    return dict(
        live.query(
            "SELECT stock_code, shop_quantity FROM catalog_product WHERE stock_code = ANY(%s)",
            (list(codes),),
        )
    )


def test_a_12000_row_receipt_goes_in_three_chunks_and_ends_synced(service, tmp_path):
    rows = [row(f"RC-{i:05d}", i % 97 + 1) for i in range(RECEIPT_ROWS)]
    status_file = tmp_path / "status.json"

    done = service.connector(
        "push", write_document(tmp_path, "PR-E2E-12000", rows), "--status-file", str(status_file)
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Document PR-E2E-12000 (receipt, 12000 rows, 3 chunks): synced" in done.stdout
    assert json.loads(status_file.read_text())["sync_status"] == "synced"
    assert audits(service, "PR-E2E-12000") == [
        ("applied", "chunk 1 of 3", "stock_receipt", 5000, 5000, 0),
        ("applied", "chunk 2 of 3", "stock_receipt", 5000, 5000, 0),
        ("applied", "chunk 3 of 3", "stock_receipt", 2000, 2000, 0),
    ]
    stored = quantities(service, [r["stock_code"] for r in rows])
    assert stored == {r["stock_code"]: r["shop_quantity"] for r in rows}


def test_a_document_with_unknown_keys_ends_partial(service, tmp_path):
    rows = [row("SM-00000", 5), row("NOPE-1", 3), row("SM-00001", 6), row("NOPE-2", 1)]

    done = service.connector("push", write_document(tmp_path, "PR-E2E-PARTIAL", rows))

    assert done.returncode == 1, done.stdout + done.stderr
    assert "Document PR-E2E-PARTIAL (receipt, 4 rows, 1 chunk): partial" in done.stdout
    assert audits(service, "PR-E2E-PARTIAL") == [
        ("applied", "chunk 1 of 1", "stock_receipt", 4, 2, 2)
    ]
    assert quantities(service, ["SM-00000", "SM-00001"]) == {"SM-00000": 5, "SM-00001": 6}
    pending = service.query(
        "SELECT stock_code, last_request_id FROM catalog_pendingproduct "
        "WHERE stock_code LIKE 'NOPE-%%' ORDER BY stock_code"
    )
    assert pending == [("NOPE-1", "PR-E2E-PARTIAL"), ("NOPE-2", "PR-E2E-PARTIAL")]


def test_a_single_sale_row_in_csv_goes_through_the_single_item_operation(service, tmp_path):
    path = tmp_path / "SALE-E2E-1.csv"
    path.write_text(
        "document_number,document_type,document_state,stock_code,status,shop_quantity,"
        "catalog_price,eshop_price,season\n"
        "SALE-E2E-1,sale,posted,SM-00002,active,8,100,90,\n",
        encoding="utf-8",
    )

    done = service.connector("push", str(path))

    assert done.returncode == 0, done.stdout + done.stderr
    assert service.query(
        "SELECT endpoint, outcome, source_type FROM catalog_syncaudit WHERE request_id = %s",
        ("SALE-E2E-1",),
    ) == [("products_item", "applied", "customer_sale")]
    assert quantities(service, ["SM-00002"]) == {"SM-00002": 8}


def test_a_paused_service_fails_the_document_after_the_first_chunk(service, tmp_path):
    rows = [row(f"SM-{i:05d}", 50 + i) for i in range(10, 22)]
    service.django(
        "from sync.pause import sync_pause_set\n"
        "sync_pause_set(paused=True, by='stock.taker', reason='stock take')\n"
    )
    try:
        done = service.connector(
            "push", write_document(tmp_path, "PR-E2E-PAUSED", rows), "--chunk-size", "5"
        )
    finally:
        service.django(
            "from sync.pause import sync_pause_set\n"
            "sync_pause_set(paused=False, by='stock.taker')\n"
        )

    assert done.returncode == 3, done.stdout + done.stderr
    assert "Document PR-E2E-PAUSED (receipt, 12 rows, 3 chunks): failed" in done.stdout
    assert "no further chunk was sent" in done.stdout
    assert [a[:2] for a in audits(service, "PR-E2E-PAUSED")] == [("paused", "chunk 1 of 3")]
    assert set(quantities(service, [r["stock_code"] for r in rows]).values()) == {0}


def test_a_lost_response_is_retried_replayed_and_applied_once(service, tmp_path):
    rows = [row(f"SM-{i:05d}", 70 + i) for i in range(25, 37)]
    upstream_port = int(service.base_url.rsplit(":", 1)[1])

    # Chunk 2's first answer is lost after the service applied it.
    with LossyProxy(upstream_port, drop={2}) as proxy:
        done = service.connector(
            "push",
            write_document(tmp_path, "PR-E2E-LOSSY", rows),
            "--chunk-size",
            "5",
            "--backoff",
            "0.2",
            base_url=proxy.base_url,
        )

    assert done.returncode == 0, done.stdout + done.stderr
    assert proxy.dropped == 1
    assert proxy.requests == 4
    assert "chunk 2 of 3: " in done.stderr
    assert "retry 1 of 5 in 0.2 s (same request_id PR-E2E-LOSSY)" in done.stderr
    assert (
        "chunk 2 of 3: 5 rows, HTTP 200, updated 5, unknown 0, stale 0, replayed, 2 attempts"
        in done.stdout
    )
    assert [a[:2] for a in audits(service, "PR-E2E-LOSSY")] == [
        ("applied", "chunk 1 of 3"),
        ("applied", "chunk 2 of 3"),
        ("replayed", "chunk 2 of 3"),
        ("applied", "chunk 3 of 3"),
    ]
    assert quantities(service, [r["stock_code"] for r in rows]) == {
        r["stock_code"]: r["shop_quantity"] for r in rows
    }
    # One quantity change per product (its level's movement), all from the applied audits:
    # nothing was applied twice.
    moved = service.query(
        "SELECT a.outcome, count(*) FROM stock_stockmovement m "
        "JOIN catalog_syncaudit a ON a.id = m.sync_audit_id WHERE a.request_id = %s "
        "AND m.kind = 'quantity' AND m.reason = 'sync' GROUP BY a.outcome",
        ("PR-E2E-LOSSY",),
    )
    assert moved == [("applied", 12)]


def test_two_documents_in_the_wrong_order_leave_the_newer_stock(service, tmp_path):
    seed_products(service, prefix="OO", count=6)
    codes = [f"OO-{i:05d}" for i in range(6)]
    # The later document (an issue posted at 09:00) arrives first, in two chunks.
    newer = write_document(
        tmp_path,
        "ISS-E2E-NEW",
        [row(code, 7) for code in codes[:4]],
        type="issue",
        posted_at="2026-01-31T09:00:00+01:00",
    )
    # The earlier receipt (08:00), delayed, arrives after it; it also names two other products.
    older = write_document(
        tmp_path,
        "PR-E2E-OLD",
        [row(code, 3) for code in codes],
        posted_at="2026-01-31T08:00:00+01:00",
    )
    status_file = tmp_path / "old-status.json"

    first = service.connector("push", newer, "--chunk-size", "2")
    second = service.connector("push", older, "--status-file", str(status_file))

    assert first.returncode == 0, first.stdout + first.stderr
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Document PR-E2E-OLD (receipt, 6 rows, 1 chunk): synced" in second.stdout
    assert "chunk 1 of 1: 6 rows, HTTP 200, updated 2, unknown 0, stale 4" in second.stdout
    assert "stale keys:" in second.stdout
    assert "[0] stock_code 'OO-00000'" in second.stdout
    # The newer stock stands; the products the newer document did not name took the receipt.
    assert quantities(service, codes) == {
        **dict.fromkeys(codes[:4], 7),
        **dict.fromkeys(codes[4:], 3),
    }
    stored = json.loads(status_file.read_text())
    assert [key["stock_code"] for key in stored["chunks"][0]["stale_keys"]] == codes[:4]
    assert service.query(
        "SELECT outcome, products_updated, stale_products FROM catalog_syncaudit "
        "WHERE request_id = %s",
        ("PR-E2E-OLD",),
    ) == [("applied", 2, 4)]
    assert service.query(
        "SELECT DISTINCT posted_at AT TIME ZONE 'UTC' FROM catalog_product "
        "WHERE stock_code = ANY(%s)",
        (codes[:4],),
    ) == [(datetime(2026, 1, 31, 8, 0),)]
    # No change recorded of the stale items: only the two applied quantities moved (their
    # levels' movements), and no price or status (no history).
    assert service.query(
        "SELECT count(*) FROM catalog_producthistory h JOIN catalog_syncaudit a "
        "ON a.id = h.audit_id WHERE a.request_id = 'PR-E2E-OLD'"
    ) == [(0,)]
    assert service.query(
        "SELECT p.stock_code, m.after FROM stock_stockmovement m "
        "JOIN catalog_syncaudit a ON a.id = m.sync_audit_id "
        "JOIN catalog_product p ON p.id = m.product_id "
        "WHERE a.request_id = 'PR-E2E-OLD' AND m.kind = 'quantity' ORDER BY 1"
    ) == [(code, 3) for code in codes[4:]]


def test_a_dry_run_push_changes_nothing_and_prints_its_changes(service, tmp_path):
    seed_products(service, prefix="DR", count=3)
    rows = [row("DR-00000", 4), row("DR-00001", 0), {**row("DR-00002", 0), "season": "winter"}]
    rows.append(row("DR-GHOST", 1))
    status_file = tmp_path / "dry-status.json"
    before = service.query(
        "SELECT stock_code, shop_quantity, season, updated_at FROM catalog_product "
        "WHERE stock_code LIKE 'DR-%%' ORDER BY stock_code"
    )

    done = service.connector(
        "push",
        write_document(tmp_path, "PR-E2E-DRY", rows),
        "--dry-run",
        "--status-file",
        str(status_file),
    )

    assert done.returncode == 1, done.stdout + done.stderr  # partial: the unknown key
    assert "Document PR-E2E-DRY (receipt, 4 rows, 1 chunk): partial (dry run" in done.stdout
    assert "chunk\tindex\tstock_code\tean\twarehouse\tfield\told\tnew" in done.stdout
    assert "1\t0\tDR-00000\t\tMAIN\tshop_quantity\t0\t4" in done.stdout
    assert "1\t2\tDR-00002\t\tMAIN\tseason\tnull\twinter" in done.stdout
    stored = json.loads(status_file.read_text())
    assert stored["dry_run"] is True
    assert [
        (c["index"], c["field"], c["old"], c["new"]) for c in stored["chunks"][0]["changes"]
    ] == [
        (0, "shop_quantity", 0, 4),
        (2, "season", None, "winter"),
    ]
    assert stored["chunks"][0]["unknown_keys"] == [
        {"index": 3, "stock_code": "DR-GHOST", "ean": "", "warehouse": "MAIN", "reason": "unknown"}
    ]
    # Nothing changed: products, history, pending keys, idempotency records.
    assert (
        service.query(
            "SELECT stock_code, shop_quantity, season, updated_at FROM catalog_product "
            "WHERE stock_code LIKE 'DR-%%' ORDER BY stock_code"
        )
        == before
    )
    assert service.query(
        "SELECT count(*) FROM catalog_pendingproduct WHERE stock_code = 'DR-GHOST'"
    ) == [(0,)]
    assert service.query(
        "SELECT count(*) FROM catalog_idempotencyrecord WHERE request_id = 'PR-E2E-DRY'"
    ) == [(0,)]
    assert audits(service, "PR-E2E-DRY") == [("dry_run", "chunk 1 of 1", "stock_receipt", 4, 3, 1)]
    # The real push afterwards, with the same request_id, is applied.
    real = service.connector("push", write_document(tmp_path, "PR-E2E-DRY", rows))
    assert real.returncode == 1, real.stdout + real.stderr
    assert "replayed" not in real.stdout
    assert quantities(service, ["DR-00000"]) == {"DR-00000": 4}


# ------------------------------------------------------------------------------
# What a user who gets something wrong is told (and that the CLI runs from anywhere)
# ------------------------------------------------------------------------------
def _semicolon_document(tmp_path, extra_column: str):
    path = tmp_path / "ISS-E2E-SEMI.csv"
    path.write_text(
        "\ufeffdocument_number;document_type;document_state;stock_code;status;shop_quantity;"
        f"catalog_price;eshop_price;{extra_column};name\n"
        "ISS-E2E-SEMI;issue;posted;SC-00000;active;6;100;90;winter;Grip, 205\n"
        'ISS-E2E-SEMI;issue;posted;SC-00001;active;7;100;90;summer;"Alpine; 225"\n',
        encoding="utf-8",
    )
    return path


def test_a_semicolon_csv_with_an_unknown_column_and_no_posted_at_is_synced_with_warnings(
    service, tmp_path
):
    seed_products(service, prefix="SC", count=2)

    done = service.connector("push", str(_semicolon_document(tmp_path, "colour")))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Document ISS-E2E-SEMI (issue, 2 rows, 1 chunk): synced" in done.stdout
    warnings = " ".join(done.stderr.split())
    assert warnings.count("warning: ") == 2
    assert "not sent: 'colour'" in warnings
    assert "carries no posted_at" in warnings and "back on sale" in warnings
    assert service.query(
        "SELECT stock_code, shop_quantity, name, season FROM catalog_product "
        "WHERE stock_code LIKE 'SC-%%' ORDER BY stock_code"
    ) == [("SC-00000", 6, "Grip, 205", None), ("SC-00001", 7, "Alpine; 225", None)]


def test_a_semicolon_csv_with_a_misspelt_column_is_refused_and_nothing_is_sent(service, tmp_path):
    seed_products(service, prefix="MS", count=2)
    path = tmp_path / "ISS-E2E-SEMI.csv"
    path.write_text(
        _semicolon_document(tmp_path, "seasn").read_text(encoding="utf-8").replace("SC-", "MS-"),
        encoding="utf-8",
    )

    done = service.connector("push", str(path))

    assert done.returncode == 2, done.stdout + done.stderr
    assert "'seasn' is not a field: did you mean 'season'?" in done.stderr
    assert "nothing was sent" in done.stderr
    assert service.query(
        "SELECT stock_code, shop_quantity FROM catalog_product "
        "WHERE stock_code LIKE 'MS-%%' ORDER BY stock_code"
    ) == [("MS-00000", 0), ("MS-00001", 0)]


def test_posted_at_given_on_the_command_line_is_stored(service, tmp_path):
    seed_products(service, prefix="PA", count=2)
    rows = [row("PA-00000", 3), row("PA-00001", 4)]

    done = service.connector(
        "push",
        write_document(tmp_path, "PR-E2E-POSTED", rows),
        "--posted-at",
        "2026-01-31T08:00:00+01:00",
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stderr
    assert service.query(
        "SELECT DISTINCT posted_at AT TIME ZONE 'UTC' FROM catalog_product "
        "WHERE stock_code LIKE 'PA-%%'"
    ) == [(datetime(2026, 1, 31, 7, 0),)]


def test_a_wrong_or_shop_key_exits_5_and_sends_nothing_more(service, tmp_path):
    shop_key = service.manage("create_api_key", "e2e-shop", "--scope", "shop").splitlines()[-1]
    rows = [row(f"SM-{i:05d}", 90) for i in range(37, 40)]
    path = write_document(tmp_path, "PR-E2E-KEY", rows, posted_at="2026-01-31T08:00:00Z")

    for key, says in (
        ("nope.not-a-key", "it is wrong, revoked or expired"),
        (shop_key.strip(), "it is valid but not a partner key"),
    ):
        done = service.connector("push", path, "--api-key", key, "--chunk-size", "1")

        assert done.returncode == 5, done.stdout + done.stderr
        text = " ".join(done.stdout.split())
        assert says in text and "no retry will help" in text
        assert "again later" not in text
        assert "retry" not in done.stderr
    assert audits(service, "PR-E2E-KEY") == []
    assert set(quantities(service, [r["stock_code"] for r in rows]).values()) == {0}


def test_the_console_script_pushes_from_outside_the_checkout(service, tmp_path):
    seed_products(service, prefix="CS", count=2)
    path = write_document(
        tmp_path,
        "PR-E2E-SCRIPT",
        [row("CS-00000", 5), row("CS-00001", 6)],
        posted_at="2026-01-31T08:00:00Z",
    )
    env = {
        **{k: v for k, v in service.env.items() if k not in ("PYTHONPATH", "DATABASE_URL")},
        "CONNECTOR_BASE_URL": service.base_url,
        "CONNECTOR_API_KEY": service.api_key,
    }

    done = subprocess.run(
        [str(Path(sys.executable).parent / "stock-sync-connector"), "push", path],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Document PR-E2E-SCRIPT (receipt, 2 rows, 1 chunk): synced" in done.stdout
    assert quantities(service, ["CS-00000", "CS-00001"]) == {"CS-00000": 5, "CS-00001": 6}
