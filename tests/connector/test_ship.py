"""`orders ship FILE.csv`: the parcels of a CSV recorded at the service, each reported; a second
run of the same file changes nothing. The calls go to the service itself, through Django's test
client."""

import io
import json
from urllib.parse import urlsplit

import pytest
from django.test import Client

from connector.cli import main
from connector.rows import FileInvalid
from connector.shipments import parse_ship_file
from connector.transport import Reply
from orders.models import Order, Shipment, ShipmentLine
from stock.models import Warehouse
from tests.orders.factories import OrderFactory, OrderItemFactory

HEADER = (
    "order_id,order_number,shipment_id,line,quantity,warehouse,shipped_at,delivered_at,"
    "carrier,tracking_number,tracking_url"
)


class ServiceTransport:
    """The connector's transport, answered by the service in this process."""

    def __init__(self):
        self.client = Client()
        self.calls: list[tuple[str, str]] = []

    def request(self, method, url, *, headers, body, timeout):
        path = urlsplit(url).path
        self.calls.append((method, path))
        response = self.client.generic(
            method,
            path,
            data=body,
            content_type=headers.get("Content-Type", "application/json"),
            HTTP_X_API_KEY=headers.get("X-API-Key", ""),
        )
        return Reply(
            status=response.status_code,
            body=response.content,
            headers={name.lower(): value for name, value in response.items()},
        )


def run(args, transport):
    out, err = io.StringIO(), io.StringIO()
    code = main(args, transport=transport, stdout=out, stderr=err, sleep=lambda _: None)
    return code, out.getvalue(), err.getvalue()


def ship_file(tmp_path, lines, header=HEADER):
    path = tmp_path / "ship.csv"
    path.write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def config(monkeypatch, api_key):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test")
    monkeypatch.setenv("CONNECTOR_API_KEY", api_key)


@pytest.mark.django_db
def test_two_parcels_of_one_order_and_one_of_another_then_a_rerun_changes_nothing(tmp_path, config):
    Warehouse.objects.create(code="EAST", name="Branch East")
    split = OrderFactory(acknowledged=True, order_number="W-1")
    OrderItemFactory(order=split, quantity=3)
    OrderItemFactory(order=split, quantity=1)
    whole = OrderFactory(acknowledged=True, order_number="W-2")
    OrderItemFactory(order=whole, quantity=2)
    url = "https://t.example/PPL-1"
    path = ship_file(
        tmp_path,
        [
            f"{split.pk},W-1,PPL-1,0,2,MAIN,2026-03-02T09:00:00+01:00,,PPL,PPL-1,{url}",
            f"{split.pk},W-1,PPL-1,1,1,,,,,,",
            f"{whole.pk},W-2,DHL-9,0,2,,2026-03-02T10:00:00+01:00,,DHL,,",
            f"{split.pk},W-1,GLS-3,0,1,EAST,2026-03-02T11:00:00+01:00,,GLS,GLS-3,",
        ],
    )
    transport = ServiceTransport()
    result_file = tmp_path / "result.json"

    code, stdout, stderr = run(
        ["orders", "ship", path, "--status-file", str(result_file)], transport
    )

    assert code == 0, (stdout, stderr)
    assert "Shipped 3 line(s): 3 recorded, 0 repeat, 0 over, 0 conflict" in stdout
    assert transport.calls == [
        ("POST", f"/api/v1/partner/orders/{split.pk}/shipments"),
        ("POST", f"/api/v1/partner/orders/{whole.pk}/shipments"),
        ("POST", f"/api/v1/partner/orders/{split.pk}/shipments"),
    ]
    reported = json.loads(result_file.read_text())
    assert [
        (r["order_id"], r["shipment_id"], r["result"], r["status_code"])
        for r in reported["results"]
    ] == [
        (split.pk, "PPL-1", "recorded", 201),
        (whole.pk, "DHL-9", "recorded", 201),
        (split.pk, "GLS-3", "recorded", 201),
    ]
    assert [r["service_status"] for r in reported["results"]] == [
        "partially_shipped",
        "shipped",
        "shipped",
    ]
    parcel = Shipment.objects.get(order=split, shipment_id="PPL-1")
    assert (parcel.warehouse, parcel.carrier, parcel.tracking_url) == ("MAIN", "PPL", url)
    assert sorted(parcel.lines.values_list("line", "quantity")) == [(0, 2), (1, 1)]
    before = (
        list(Order.objects.order_by("pk").values_list("status", "status_changed_at")),
        list(Shipment.objects.order_by("pk").values()),
        ShipmentLine.objects.count(),
    )

    code, stdout, _ = run(["orders", "ship", path], transport)

    assert code == 0
    assert "Shipped 3 line(s): 0 recorded, 3 repeat, 0 over, 0 conflict" in stdout
    after = (
        list(Order.objects.order_by("pk").values_list("status", "status_changed_at")),
        list(Shipment.objects.order_by("pk").values()),
        ShipmentLine.objects.count(),
    )
    assert after == before


@pytest.mark.django_db
def test_units_over_and_another_parcel_under_the_id_need_a_person(tmp_path, config):
    order = OrderFactory(acknowledged=True)
    OrderItemFactory(order=order, quantity=2)
    transport = ServiceTransport()
    run(["orders", "ship", ship_file(tmp_path, [f"{order.pk},,P-1,0,1,,,,,,"])], transport)

    code, stdout, _ = run(
        [
            "orders",
            "ship",
            ship_file(tmp_path, [f"{order.pk},,P-1,0,2,,,,,,", f"{order.pk},,P-2,0,5,,,,,,"]),
        ],
        transport,
    )

    assert code == 1
    assert "0 recorded, 0 repeat, 1 over, 1 conflict" in stdout
    assert "shipment P-1: conflict: the order has another parcel under this shipment_id" in stdout
    assert "shipment P-2: over: line 0: 5 more of 2 ordered, 1 already shipped" in stdout
    assert ShipmentLine.objects.count() == 1


def test_the_file_is_checked_whole_before_anything_is_sent(tmp_path):
    text = "\n".join(
        [
            HEADER,
            "1,,P 1,0,1,,,,,,",
            "2,,P-2,x,0,,yesterday,,,,ftp://x",
            "3,,P-3,0,1,MAIN,,,,,",
            "3,,P-3,0,1,EAST,,,,,",
        ]
    )
    with pytest.raises(FileInvalid) as refused:
        parse_ship_file(text)
    assert refused.value.problems == [
        "line 2: shipment_id 'P 1' is not 1 to 64 characters of A-Z a-z 0-9 . _ : / -",
        "line 3: line 'x' is not a whole number (0 for the order's first line)",
        "line 3: quantity '0' is not a whole number of at least 1",
        "line 3: shipped_at 'yesterday' is not an ISO 8601 date-time",
        "line 3: tracking_url 'ftp://x' is not an absolute http or https URL made of the "
        "characters RFC 3986 allows (percent-encode spaces, quotes, <, > and non-ASCII)",
        "line 5: order 3 shipment P-3: warehouse 'EAST' differs from 'MAIN' on an earlier row "
        "of the parcel",
        "line 5: order 3 shipment P-3: line 0 appears twice",
    ]


def test_rows_of_one_parcel_are_one_call_in_the_order_first_named():
    parcels = parse_ship_file(
        "order_id;shipment_id;line;quantity;carrier\n7;A;1;2;\n8;A;0;1;DHL\n7;A;0;1;PPL\n"
    )
    assert [(p.order_id, p.shipment_id, p.units, p.fields) for p in parcels] == [
        (7, "A", ((1, 2), (0, 1)), (("carrier", "PPL"),)),
        (8, "A", ((0, 1),), (("carrier", "DHL"),)),
    ]
    assert json.loads(parcels[0].body()) == {
        "shipment_id": "A",
        "lines": [{"line": 1, "quantity": 2}, {"line": 0, "quantity": 1}],
        "carrier": "PPL",
    }
