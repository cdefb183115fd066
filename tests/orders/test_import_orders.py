import json
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from orders.models import Order, OrderItem
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db


def order_record(number: str = "20260001", **overrides) -> dict:
    record = {
        "order_number": number,
        "created_at": "2026-03-01T09:30:00+01:00",
        "status": "paid",
        "customer": {
            "name": "Jana Nováková",
            "email": "jana@example.com",
            "phone": "+420 601 123 456",
            "ico": None,
            "dic": None,
            "address": "Masarykova 1",
            "city": "Brno",
            "zip_code": "602 00",
        },
        "items": [
            {
                "name": "Winter Grip 205/55 R16",
                "quantity": 2,
                "unit_price": 84.5,
                "total": 169.0,
                "ean": "8591234567001",
                "stock_code": "PT-205-55-16-W",
            }
        ],
        "subtotal": 169.0,
        "vat_total": 35.49,
        "total": 204.49,
        "currency": "EUR",
        "partner_sync_status": "pending_partner",
        "partner_reference": None,
    }
    record.update(overrides)
    return record


@pytest.fixture
def write(tmp_path):
    def write(data, name="orders.json"):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return path

    return write


def run(path) -> list[str]:
    out = StringIO()
    call_command("import_orders", str(path), stdout=out)
    return out.getvalue().splitlines()


def test_creates_orders_and_prints_number_and_id(write):
    path = write([order_record("20260001"), order_record("20260002", partner_sync_status=None)])
    lines = run(path)
    first = Order.objects.get(order_number="20260001")
    second = Order.objects.get(order_number="20260002")
    assert lines == [f"20260001 {first.pk}", f"20260002 {second.pk}"]
    assert first.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER
    assert first.created_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    assert first.customer_name == "Jana Nováková"
    assert first.customer_zip_code == "602 00"
    assert first.total == Decimal("204.49")
    item = first.items.get()
    assert (item.name, item.quantity, item.unit_price, item.ean, item.stock_code) == (
        "Winter Grip 205/55 R16",
        2,
        Decimal("84.5"),
        "8591234567001",
        "PT-205-55-16-W",
    )
    assert second.partner_sync_status is None


def test_absent_partner_status_is_a_legacy_order_the_partner_never_sees(write, api_client):
    record = order_record()
    del record["partner_sync_status"]
    del record["partner_reference"]
    del record["currency"]
    run(write([record]))
    order = Order.objects.get()
    assert order.partner_sync_status is None
    assert order.currency == "EUR"
    poll = api_client.get(reverse("partner_api:orders-poll"), {"partner_status": "all"})
    assert poll.json()["count"] == 0


def test_imported_order_is_polled_as_it_was_written(write, api_client):
    record = order_record()
    run(write([record]))
    polled = api_client.get(reverse("partner_api:orders-poll")).json()["orders"][0]
    polled.pop("order_id")
    # What became of the order (the status operation's fields) is not part of an import, and
    # an imported order reserved nothing: its lines have no allocations.
    assert polled == {
        **record,
        "items": [{**item, "allocations": [], "shipped": 0} for item in record["items"]],
        "created_at": "2026-03-01T08:30:00+00:00",
        "status_changed_at": None,
        "carrier": None,
        "tracking_number": None,
        "tracking_url": None,
        "shipments": [],
    }


def test_updates_by_order_number_and_replaces_items(write):
    run(write([order_record()]))
    order = Order.objects.get()
    items = [
        {"name": "Summer Sport", "quantity": 1, "unit_price": 109, "total": 109},
        {"name": "Fitting", "quantity": 4, "unit_price": "5.5", "total": "22"},
    ]
    lines = run(write([order_record(status="shipped", items=items, total=131)]))
    assert lines == [f"20260001 {order.pk}"]
    order.refresh_from_db()
    assert order.status == "shipped"
    assert order.total == Decimal("131")
    assert [i.name for i in order.items.order_by("id")] == ["Summer Sport", "Fitting"]
    assert OrderItem.objects.count() == 2


def test_acknowledged_order_keeps_its_acknowledgement(write):
    existing = OrderFactory(order_number="20260001", acknowledged=True, partner_reference="FA-1")
    run(write([order_record(status="shipped")]))
    existing.refresh_from_db()
    assert existing.status == "shipped"
    assert existing.partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED
    assert existing.partner_reference == "FA-1"


def test_acknowledged_in_the_file_needs_a_reference(write):
    path = write([order_record(partner_sync_status="acknowledged")])
    with pytest.raises(CommandError, match="needs a partner_reference"):
        run(path)
    run(write([order_record(partner_sync_status="acknowledged", partner_reference="FA-3")]))
    order = Order.objects.get()
    assert order.partner_reference == "FA-3"
    assert order.acknowledged_at is not None


def test_order_id_in_the_file_is_ignored(write):
    OrderFactory(order_number="OTHER")
    other = Order.objects.get()
    run(write([order_record(order_id=other.pk)]))
    assert Order.objects.count() == 2
    assert Order.objects.get(pk=other.pk).order_number == "OTHER"


def test_naive_created_at_is_read_in_the_time_zone(write, settings):
    settings.TIME_ZONE = "Europe/Prague"
    run(write([order_record(created_at="2026-03-01T09:30:00")]))
    assert Order.objects.get().created_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"customer": {"name": "Eva"}}, r"order 2 \(20260002\): customer\.email: Field required"),
        ({"total": -1}, r"order 2 \(20260002\): total: Input should be greater than or equal to 0"),
        (
            {"items": [{"name": "x", "quantity": 0, "unit_price": 1, "total": 0}]},
            "items.0.quantity",
        ),
        ({"partner_sync_status": "sent"}, "partner_sync_status"),
        ({"created_at": "soon"}, "created_at"),
        ({"currency": "euro"}, "currency"),
        ({"order_number": "  "}, "order_number"),
        ({"subtotal": True}, "subtotal"),
    ],
)
def test_a_bad_order_imports_nothing(write, bad, message):
    path = write([order_record("20260001"), order_record("20260002", **bad)])
    with pytest.raises(CommandError, match=message) as caught:
        run(path)
    assert str(caught.value).startswith("Nothing was imported.")
    assert Order.objects.count() == 0


def test_duplicate_order_numbers_import_nothing(write):
    with pytest.raises(CommandError, match="'20260001' appears more than once"):
        run(write([order_record(), order_record()]))
    assert Order.objects.count() == 0


def test_a_failing_update_keeps_the_stored_order(write):
    run(write([order_record(status="paid")]))
    with pytest.raises(CommandError):
        run(write([order_record(status="shipped"), order_record("X", total="abc")]))
    order = Order.objects.get()
    assert order.status == "paid"
    assert order.items.count() == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"order_number": "1"}', "must hold a JSON list of orders"),
        ("[1, ", "cannot be read"),
        ("[1]", r"order 1: not an object"),
    ],
)
def test_unreadable_file(write, content, message):
    with pytest.raises(CommandError, match=message):
        run(write(content))


def test_missing_file(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run(tmp_path / "nope.json")


@pytest.mark.parametrize("created_at", ["absent", None])
def test_an_order_without_created_at_is_told_that_it_is_required(write, created_at):
    record = order_record("20260002")
    if created_at == "absent":
        del record["created_at"]
    else:
        record["created_at"] = created_at
    with pytest.raises(CommandError) as caught:
        run(write([order_record("20260001"), record]))
    message = str(caught.value)
    assert "order 2 (20260002): created_at: Field required: when the customer placed the order" in (
        message
    )
    assert "ISO 8601" in message
    assert Order.objects.count() == 0


def test_the_help_names_the_required_fields_and_the_sample_file(capsys):
    with pytest.raises(SystemExit):
        call_command("import_orders", "--help")
    text = " ".join(capsys.readouterr().out.split())
    for required in ("order_number", "created_at", "status", "customer", "items", "total"):
        assert required in text
    assert "orders/examples/orders.json" in text


def test_an_order_with_shipments_keeps_its_items(write, api_client):
    """Shipments name an order's lines by their place among its items: an import that would
    change the items of an order with shipments refuses the file; the same items again pass."""
    items = [
        {"name": "Winter Grip", "quantity": 2, "unit_price": 84.5, "total": 169.0},
        {"name": "Fitting", "quantity": 4, "unit_price": 5.5, "total": 22.0},
    ]
    acknowledged = {"partner_sync_status": "acknowledged", "partner_reference": "FA-7"}
    run(write([order_record(items=items, **acknowledged)]))
    order = Order.objects.get()
    kept = list(order.items.order_by("id").values_list("id", "name", "quantity"))
    shipped = api_client.post(
        reverse("partner_api:orders-shipments", args=[order.pk]),
        {"shipment_id": "P-1", "lines": [{"line": 1, "quantity": 4}]},
        format="json",
    )
    assert shipped.status_code == 201, shipped.json()

    reordered = order_record(items=list(reversed(items)), **acknowledged)
    fewer = order_record(items=items[:1], **acknowledged)
    for record in (reordered, fewer):
        with pytest.raises(CommandError) as caught:
            run(write([order_record("20260002"), record]))
        assert str(caught.value) == (
            "Nothing was imported. Problems:\norder 2: order_number '20260001' has shipments, "
            "which name its lines by their place among its 2 item(s); an import cannot change "
            "its items"
        )
        assert list(order.items.order_by("id").values_list("id", "name", "quantity")) == kept
        assert not Order.objects.filter(order_number="20260002").exists()

    # The same items again (the rest of the order may change): imported, the items kept.
    assert run(write([order_record(items=items, total=191.0, **acknowledged)])) == [
        f"20260001 {order.pk}"
    ]
    order.refresh_from_db()
    assert order.total == Decimal("191")
    assert list(order.items.order_by("id").values_list("id", "name", "quantity")) == kept
    feed = api_client.get(reverse("partner_api:orders-poll"), {"partner_status": "all"}).json()
    assert [item["shipped"] for item in feed["orders"][0]["items"]] == [0, 4]


def test_an_order_without_shipments_still_takes_other_items(write):
    run(write([order_record(partner_sync_status="acknowledged", partner_reference="FA-7")]))
    items = [{"name": "Fitting", "quantity": 4, "unit_price": 5.5, "total": 22.0}]
    run(write([order_record(items=items)]))
    assert list(OrderItem.objects.values_list("name", "quantity")) == [("Fitting", 4)]
