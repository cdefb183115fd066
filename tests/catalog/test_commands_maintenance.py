"""Operators' commands: API keys, audit purge, pending-key export and rematch, sync status."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from catalog.models import (
    IdempotencyRecord,
    PendingProduct,
    Product,
    ProductHistory,
    SyncAudit,
)
from monitoring.selectors import sync_dashboard_figures
from partner_api.keys import api_key_create
from stock.models import Reservation, StockMovement
from stock.warehouses import default_warehouse
from sync.pause import sync_pause_set
from tests.factories import (
    IdempotencyRecordFactory,
    PendingProductFactory,
    ProductFactory,
    ProductHistoryFactory,
    SyncAuditFactory,
)
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db


def run(name, *args):
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def ago(**kwargs):
    return timezone.now() - timedelta(**kwargs)


@pytest.mark.parametrize(
    "name",
    [
        "create_api_key",
        "revoke_api_key",
        "list_api_keys",
        "purge_sync_audits",
        "export_pending",
        "rematch_pending",
        "sync_status",
    ],
)
def test_every_command_has_help(name, capsys):
    with pytest.raises(SystemExit) as caught:
        call_command(name, "--help")

    assert caught.value.code == 0
    assert "usage:" in capsys.readouterr().out


# --- API keys -----------------------------------------------------------------------------


def test_revoke_api_key_revokes_every_active_key_of_that_name():
    api_key_create(name="erp")
    api_key_create(name="erp")
    api_key_create(name="bi")

    out, _ = run("revoke_api_key", "erp")

    assert out.strip() == "Revoked 2 API key(s) named 'erp'."
    assert set(APIKey.objects.filter(revoked=True).values_list("name", flat=True)) == {"erp"}
    assert APIKey.objects.get(name="bi").revoked is False


def test_revoke_api_key_of_an_unknown_name_is_an_error():
    with pytest.raises(CommandError, match="No active API key named 'nobody'"):
        run("revoke_api_key", "nobody")


def test_a_revoked_key_is_refused_by_the_api(anon_client):
    _, key = api_key_create(name="erp")
    run("revoke_api_key", "erp")

    response = anon_client.put(
        reverse("partner_api:products-item"), {}, format="json", HTTP_X_API_KEY=key
    )

    assert response.status_code == 401


def test_list_api_keys_shows_state_but_never_the_key():
    _, active = api_key_create(name="erp")
    _, revoked = api_key_create(name="old-erp")
    APIKey.objects.filter(name="old-erp").update(revoked=True)
    api_key_create(name="temp", expiry_date=ago(days=1))
    api_key_create(name="storefront", scope="shop")

    out, _ = run("list_api_keys")

    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "PREFIX", "CREATED", "EXPIRES", "STATE"]
    states = {line.split()[0]: line.split()[-1] for line in lines[1:]}
    assert states == {
        "erp": "active",
        "old-erp": "revoked",
        "temp": "expired",
        "storefront": "active",
    }
    scopes = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert scopes == {
        "erp": "partner",
        "old-erp": "partner",
        "temp": "partner",
        "storefront": "shop",
    }
    assert active not in out and revoked not in out
    assert active.split(".")[0] in out  # the prefix identifies the key


def test_list_api_keys_active_only():
    api_key_create(name="erp")
    api_key_create(name="temp", expiry_date=ago(minutes=1))

    out, _ = run("list_api_keys", "--active")

    assert [line.split()[0] for line in out.splitlines()[1:]] == ["erp"]


def test_list_api_keys_without_keys():
    assert run("list_api_keys")[0].strip() == "No API keys."


# --- purge_sync_audits --------------------------------------------------------------------


def test_purge_removes_old_audits_their_history_and_expired_idempotency_records():
    old = SyncAuditFactory(created_at=ago(days=40))
    ProductHistoryFactory.create_batch(3, audit=old)
    recent = SyncAuditFactory(created_at=ago(days=5))
    kept_history = ProductHistoryFactory(audit=recent)
    manual_history = ProductHistoryFactory(audit=None, changed_at=ago(days=90), source="admin")
    IdempotencyRecordFactory(created_at=ago(hours=30))
    fresh_record = IdempotencyRecordFactory(created_at=ago(hours=2))

    out, _ = run("purge_sync_audits", "--older-than", "30")

    assert out.startswith("Removed 1 sync audit(s) older than ")
    assert out.splitlines()[0].endswith(
        "3 product history row(s) and 1 expired idempotency record(s)."
    )
    assert list(SyncAudit.objects.all()) == [recent]
    assert set(ProductHistory.objects.all()) == {kept_history, manual_history}
    assert list(IdempotencyRecord.objects.all()) == [fresh_record]
    # The products themselves stay.
    assert Product.objects.count() == 5


def test_purge_keeps_the_reservations_an_old_audit_consumed():
    # The reservation's link to the sync call that consumed it has no database constraint:
    # the purge itself lets go of it, and the reservation stays, consumed.
    old = SyncAuditFactory(created_at=ago(days=40))
    reservation = Reservation.objects.create(
        product=ProductFactory(),
        order=OrderFactory(),
        warehouse=default_warehouse(),
        quantity=2,
        state=Reservation.State.CONSUMED,
        sync_audit=old,
    )

    run("purge_sync_audits", "--older-than", "30")

    assert not SyncAudit.objects.exists()
    reservation.refresh_from_db()
    assert reservation.state == Reservation.State.CONSUMED
    assert reservation.sync_audit_id is None


def test_purge_removes_old_movements_but_those_of_orders_with_an_open_reservation():
    product = ProductFactory()
    warehouse = default_warehouse()
    waiting, done = OrderFactory(), OrderFactory()
    Reservation.objects.create(
        product=product, order=waiting, warehouse=warehouse, quantity=1, state="open"
    )
    Reservation.objects.create(
        product=product, order=done, warehouse=warehouse, quantity=1, state="consumed"
    )

    def movement(order, days):
        return StockMovement.objects.create(
            product=product,
            warehouse=warehouse,
            kind=StockMovement.Kind.RESERVED,
            before=0,
            after=1,
            reason=StockMovement.Reason.PLACEMENT,
            order=order,
            created_at=ago(days=days),
        )

    kept_open = movement(waiting, 40)
    movement(done, 40)
    movement(None, 40)
    recent = movement(done, 3)
    before = StockMovement.objects.count()

    dry, _ = run("purge_sync_audits", "--older-than", "30", "--dry-run")
    assert "Would remove 2 stock movement(s)" in dry
    assert StockMovement.objects.count() == before
    out, _ = run("purge_sync_audits", "--older-than", "30")
    assert "Removed 2 stock movement(s)" in out
    assert set(StockMovement.objects.filter(product=product, reason="placement")) == {
        kept_open,
        recent,
    }


def test_purge_removes_old_resolved_and_dismissed_pending_keys_never_open_ones():
    old = {"last_seen": ago(days=40), "first_seen": ago(days=50)}
    resolved = PendingProductFactory(
        state=PendingProduct.State.RESOLVED, resolved_at=ago(days=35), **old
    )
    dismissed = PendingProductFactory(
        state=PendingProduct.State.DISMISSED, resolved_at=ago(days=31), **old
    )
    old_open = PendingProductFactory(**old)
    recently_closed = PendingProductFactory(
        state=PendingProduct.State.RESOLVED, resolved_at=ago(days=2), **old
    )
    recently_seen = PendingProductFactory(
        state=PendingProduct.State.DISMISSED, resolved_at=ago(days=1), last_seen=ago(days=1)
    )

    dry, _ = run("purge_sync_audits", "--older-than", "30", "--dry-run")
    assert "Would remove 2 resolved or dismissed pending key(s)" in dry
    assert PendingProduct.objects.count() == 5

    out, _ = run("purge_sync_audits", "--older-than", "30")

    assert "Removed 2 resolved or dismissed pending key(s)" in out
    assert set(PendingProduct.objects.all()) == {old_open, recently_closed, recently_seen}
    assert not PendingProduct.objects.filter(pk__in=[resolved.pk, dismissed.pk]).exists()


def test_purge_goes_through_many_audits_in_batches(settings, monkeypatch):
    monkeypatch.setattr("catalog.maintenance.PURGE_BATCH_SIZE", 3)
    audits = SyncAuditFactory.create_batch(7, created_at=ago(days=10))
    for audit in audits:
        ProductHistoryFactory(audit=audit)

    out, _ = run("purge_sync_audits", "--older-than", "7")

    assert "Removed 7 sync audit(s)" in out
    assert "7 product history row(s)" in out
    assert not SyncAudit.objects.exists()


def test_purge_dry_run_counts_and_removes_nothing():
    old = SyncAuditFactory(created_at=ago(days=40))
    ProductHistoryFactory(audit=old)
    IdempotencyRecordFactory(created_at=ago(days=3))

    out, _ = run("purge_sync_audits", "--older-than", "30", "--dry-run")

    assert out.startswith("Would remove 1 sync audit(s)")
    assert "1 product history row(s) and 1 expired idempotency record(s)" in out
    assert SyncAudit.objects.count() == 1
    assert ProductHistory.objects.count() == 1
    assert IdempotencyRecord.objects.count() == 1


def test_purge_follows_the_idempotency_retention_setting(settings):
    settings.IDEMPOTENCY_RETENTION_HOURS = 72
    IdempotencyRecordFactory(created_at=ago(hours=30))

    out, _ = run("purge_sync_audits", "--older-than", "30")

    assert "0 expired idempotency record(s)" in out
    assert IdempotencyRecord.objects.count() == 1


@pytest.mark.parametrize("days", ["0", "-3"])
def test_purge_refuses_a_non_positive_age(days):
    with pytest.raises(CommandError) as error:
        run("purge_sync_audits", "--older-than", days)
    # In the option's own words, not the service's argument name.
    assert str(error.value) == f"--older-than must be at least 1 (days); got {days}."
    assert "older_than_days" not in str(error.value)


def test_purge_needs_the_age():
    with pytest.raises(CommandError, match="--older-than"):
        run("purge_sync_audits")


# --- export_pending -----------------------------------------------------------------------


def read_csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_export_pending_writes_the_open_keys_with_their_last_values(tmp_path):
    PendingProductFactory(
        stock_code="B-2",
        ean="8590000000002",
        reason=PendingProduct.Reason.AMBIGUOUS,
        times_seen=4,
        last_request_id="PR-9",
        payload={
            "stock_code": "B-2",
            "ean": "8590000000002",
            "status": "active",
            "shop_quantity": 5,
            "catalog_price": "12.5",
            "eshop_price": "11",
            "run_on_flat": True,
            "season": "winter",
        },
    )
    PendingProductFactory(stock_code="A-1")
    PendingProductFactory(stock_code="Z-9", state=PendingProduct.State.RESOLVED)
    path = tmp_path / "pending.csv"

    out, _ = run("export_pending", str(path))

    assert out.strip() == f"Exported 2 pending key(s) to {path}."
    rows = read_csv(path.read_text(encoding="utf-8"))
    assert [r["stock_code"] for r in rows] == ["A-1", "B-2"]
    second = rows[1]
    assert {k: second[k] for k in ("ean", "status", "shop_quantity", "catalog_price")} == {
        "ean": "8590000000002",
        "status": "active",
        "shop_quantity": "5",
        "catalog_price": "12.5",
    }
    assert second["run_on_flat"] == "true"
    assert second["season"] == "winter"
    assert second["brand"] == ""
    assert (second["reason"], second["state"], second["times_seen"]) == ("ambiguous", "open", "4")
    assert second["last_request_id"] == "PR-9"


def test_an_exported_file_completed_by_staff_loads_with_import_products(tmp_path):
    PendingProductFactory(stock_code="NEW-1")
    path = tmp_path / "pending.csv"
    run("export_pending", str(path))

    run("import_products", str(path))

    product = Product.objects.get(stock_code="NEW-1")
    assert product.shop_quantity == 3
    assert str(product.eshop_price) == "9.0000"


def test_export_pending_all_states_to_stdout():
    PendingProductFactory(stock_code="A-1")
    PendingProductFactory(stock_code="B-1", state=PendingProduct.State.DISMISSED)

    out, err = run("export_pending", "-", "--state", "all")

    assert [r["stock_code"] for r in read_csv(out)] == ["A-1", "B-1"]
    assert err.strip() == "Exported 2 pending key(s)."


def test_export_pending_into_a_missing_directory_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="no such directory"):
        run("export_pending", str(tmp_path / "nowhere" / "pending.csv"))


# --- rematch_pending ----------------------------------------------------------------------


def test_rematch_pending_resolves_keys_that_a_product_now_answers():
    pending = PendingProductFactory(stock_code="LATE-1")
    PendingProductFactory(stock_code="STILL-UNKNOWN")
    product = ProductFactory(stock_code="LATE-1", ean="", shop_quantity=0)

    out, _ = run("rematch_pending", "--by", "alice")

    assert out.strip() == "Resolved 1 pending key(s)."
    pending.refresh_from_db()
    assert pending.state == PendingProduct.State.RESOLVED
    assert pending.resolved_by == "alice"
    assert pending.resolved_product == product
    assert PendingProduct.objects.filter(state=PendingProduct.State.OPEN).count() == 1


# --- sync_status ----------------------------------------------------------------------------


def test_sync_status_on_an_empty_service():
    out, _ = run("sync_status")

    assert out.splitlines() == [
        "Pending keys open:              0",
        "Orders waiting for the partner: 0",
        "Last accepted sync:             never",
        "Refused syncs, last 24 h:       0",
        "Synchronization:                running",
    ]


def test_sync_status_shows_the_dashboard_figures():
    PendingProductFactory.create_batch(2)
    PendingProductFactory(state=PendingProduct.State.RESOLVED)
    OrderFactory(created_at=ago(hours=3, minutes=5))
    OrderFactory(created_at=ago(minutes=20))
    OrderFactory(acknowledged=True, created_at=ago(days=3))
    OrderFactory(legacy=True, created_at=ago(days=9))
    SyncAuditFactory(created_at=ago(hours=2))
    SyncAuditFactory(outcome=SyncAudit.Outcome.REPLAYED, created_at=ago(minutes=14, seconds=10))
    SyncAuditFactory(outcome=SyncAudit.Outcome.REFUSED, status_code=400, created_at=ago(hours=1))
    SyncAuditFactory(outcome=SyncAudit.Outcome.REFUSED, status_code=401, created_at=ago(hours=30))
    sync_pause_set(paused=True, by="alice", reason="stock take")

    out, _ = run("sync_status")

    lines = dict(line.split(":", 1) for line in out.splitlines())
    assert lines["Pending keys open"].strip() == "2"
    assert lines["Orders waiting for the partner"].strip().startswith("2 (oldest 3 h 5 min ago, ")
    assert lines["Last accepted sync"].strip().startswith("14 min ago (")
    assert lines["Refused syncs, last 24 h"].strip() == "1"
    assert lines["Synchronization"].strip().startswith("PAUSED by alice since ")
    assert lines["Synchronization"].strip().endswith("(stock take)")


def test_sync_status_as_json():
    OrderFactory(created_at=ago(hours=1))
    SyncAuditFactory(created_at=ago(seconds=90))

    out, _ = run("sync_status", "--json")

    data = json.loads(out)
    assert data["orders_waiting"] == 1
    assert 3590 <= data["oldest_waiting_age_seconds"] <= 3700
    assert 85 <= data["last_accepted_sync_age_seconds"] <= 200
    assert data["paused"] is False
    assert data["paused_by"] == ""


def test_dashboard_figures_after_the_pause_is_lifted():
    sync_pause_set(paused=True, by="alice", reason="stock take")
    sync_pause_set(paused=False, by="bob")

    figures = sync_dashboard_figures()

    assert figures.paused is False
    assert figures.paused_by == ""
    assert figures.pause_reason == ""
