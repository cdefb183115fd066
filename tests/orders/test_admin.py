import re

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE, LogEntry
from django.urls import reverse

from orders.models import Order
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory, order_with_items
from tests.shop.helpers import ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:orders_order_changelist")


def listed(response) -> set[str]:
    return {order.order_number for order in response.context["cl"].result_list}


class TestChangelist:
    @pytest.fixture
    def orders(self):
        return {
            "pending": OrderFactory(status="paid"),
            "acknowledged": OrderFactory(acknowledged=True, partner_reference="FA-77"),
            "legacy": OrderFactory(
                legacy=True, customer_name="Petr Svoboda", customer_email="petr@example.org"
            ),
        }

    def test_one_column_says_what_the_partner_system_has(self, admin_client, orders):
        html = admin_client.get(CHANGELIST).content.decode()

        cells = re.findall(r'<td class="field-partner_display">(.*?)</td>', html, re.S)
        assert sorted(cells) == [
            "-",
            'acknowledged<br><span class="reference">FA-77</span>',
            "pending",
        ]

    def test_the_status_column_carries_the_tracking_number(self, admin_client):
        OrderFactory(acknowledged=True, status="shipped", tracking_number="PPL-555")
        OrderFactory(acknowledged=True, status="new")

        html = admin_client.get(CHANGELIST).content.decode()

        cells = re.findall(r'<td class="field-status_display">(.*?)</td>', html, re.S)
        assert sorted(cells) == ["new", 'shipped<br><span class="reference">PPL-555</span>']

    def test_lists_every_order(self, admin_client, orders):
        response = admin_client.get(CHANGELIST)
        assert response.status_code == 200
        assert listed(response) == {o.order_number for o in orders.values()}

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ({"partner_sync_status__exact": "pending_partner"}, ["pending"]),
            ({"partner_sync_status__exact": "acknowledged"}, ["acknowledged"]),
            ({"partner_sync_status__isnull": "True"}, ["legacy"]),
            ({"status__exact": "paid"}, ["pending"]),
            ({"q": "FA-77"}, ["acknowledged"]),
            ({"q": "petr@example.org"}, ["legacy"]),
            ({"q": "Svoboda"}, ["legacy"]),
        ],
    )
    def test_filters_and_search(self, admin_client, orders, query, expected):
        response = admin_client.get(CHANGELIST, query)
        assert response.status_code == 200
        assert listed(response) == {orders[name].order_number for name in expected}

    def test_the_list_shows_and_filters_where_each_order_came_from(
        self, admin_client, orders, shop_client
    ):
        product = ProductFactory(shop_quantity=5)
        placed = place(shop_client, order_body(line(product, 1), number="W-SRC")).json()

        response = admin_client.get(CHANGELIST)
        html = response.content.decode()
        cells = re.findall(r'<td class="field-origin[^"]*">([^<]*)</td>', html)
        assert sorted(cells) == ["import", "import", "import", "shop"]
        assert ">Origin</a>" in html
        # The filter names both in full.
        assert "By origin" in html
        assert "Placed by the shop</a>" in html
        assert "Imported</a>" in html
        shop = admin_client.get(CHANGELIST, {"source__exact": "shop"})
        assert listed(shop) == {placed["order_number"]}
        imported = admin_client.get(CHANGELIST, {"source__exact": "import"})
        assert listed(imported) == {o.order_number for o in orders.values()}

    def test_search_by_order_number(self, admin_client, orders):
        number = orders["pending"].order_number
        assert listed(admin_client.get(CHANGELIST, {"q": number})) == {number}

    def test_date_filter(self, admin_client):
        old = OrderFactory(created_at="2020-01-01T10:00:00+00:00")
        recent = OrderFactory()
        response = admin_client.get(CHANGELIST, {"created_at__gte": "2021-01-01"})
        assert listed(response) == {recent.order_number}
        response = admin_client.get(CHANGELIST, {"created_at__year": "2020"})
        assert listed(response) == {old.order_number}

    def test_change_page_shows_items_inline(self, admin_client):
        order = order_with_items(2)
        response = admin_client.get(reverse("admin:orders_order_change", args=[order.pk]))
        assert response.status_code == 200
        for item in order.items.all():
            assert item.name in response.content.decode()


def run_action(client, action, orders, confirm=False):
    data = {"action": action, ACTION_CHECKBOX_NAME: [o.pk for o in orders]}
    if confirm:
        data["confirm"] = "yes"
    return client.post(CHANGELIST, data)


class TestHandToPartner:
    def test_asks_for_confirmation_first(self, admin_client):
        legacy = OrderFactory(legacy=True)
        response = run_action(admin_client, "hand_to_partner", [legacy])
        assert response.status_code == 200
        assert legacy.order_number in response.content.decode()
        assert 'name="confirm" value="yes"' in response.content.decode()
        legacy.refresh_from_db()
        assert legacy.partner_sync_status is None
        assert not LogEntry.objects.exists()

    def test_confirmed_sets_pending_and_leaves_a_trace(self, admin_client, admin_user):
        legacy = OrderFactory(legacy=True)
        acknowledged = OrderFactory(acknowledged=True, partner_reference="FA-1")
        response = run_action(admin_client, "hand_to_partner", [legacy, acknowledged], confirm=True)
        assert response.status_code == 302
        legacy.refresh_from_db()
        acknowledged.refresh_from_db()
        assert legacy.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER
        assert legacy.partner_status_changed_by == admin_user.username
        assert legacy.partner_status_changed_at is not None
        # An order the partner already has is left as it is.
        assert acknowledged.partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED
        assert acknowledged.partner_reference == "FA-1"
        entry = LogEntry.objects.get()
        assert entry.user == admin_user
        assert entry.action_flag == CHANGE
        assert entry.object_id == str(legacy.pk)
        assert "partner system" in entry.get_change_message()

    def test_handed_order_is_polled(self, admin_client, api_client):
        legacy = OrderFactory(legacy=True)
        run_action(admin_client, "hand_to_partner", [legacy], confirm=True)
        poll = api_client.get(reverse("partner_api:orders-poll")).json()
        assert [o["order_id"] for o in poll["orders"]] == [legacy.pk]


class TestClearAcknowledgement:
    def test_asks_for_confirmation_first(self, admin_client):
        order = OrderFactory(acknowledged=True, partner_reference="FA-1")
        response = run_action(admin_client, "clear_acknowledgement", [order])
        assert response.status_code == 200
        assert "FA-1" in response.content.decode()
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED

    def test_confirmed_back_to_pending_with_a_trace(self, admin_client, admin_user, api_client):
        order = OrderFactory(acknowledged=True, partner_reference="FA-1")
        pending = OrderFactory()
        response = run_action(admin_client, "clear_acknowledgement", [order, pending], confirm=True)
        assert response.status_code == 302
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER
        assert order.partner_reference is None
        assert order.acknowledged_at is None
        assert order.partner_status_changed_by == admin_user.username
        entry = LogEntry.objects.get()
        assert entry.object_id == str(order.pk)
        assert "'FA-1'" in entry.get_change_message()
        # The partner may now acknowledge it again, with another reference.
        response = api_client.post(
            reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk}),
            {"partner_reference": "FA-2"},
            format="json",
        )
        assert response.status_code == 200

    def test_staff_without_change_permission_cannot_run_it(self, client, django_user_model):
        user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
        client.force_login(user)
        order = OrderFactory(acknowledged=True)
        response = run_action(client, "clear_acknowledgement", [order], confirm=True)
        assert response.status_code == 403
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED


def _changes(html: str) -> list[str]:
    return re.findall(r'<td class="field-change">\s*<p>([^<]*)</p>', html)


def _states(html: str) -> list[str]:
    return re.findall(r'<td class="field-state">\s*<p>(\w+)</p>', html)


class TestReservationsOfAnOrder:
    """The order's page lists its reservations and what became of each, read-only."""

    @pytest.fixture
    def order(self, shop_client):
        from tests.factories import ProductFactory
        from tests.shop.helpers import line, order_body, place

        first = ProductFactory(stock_code="RES-A", shop_quantity=5)
        second = ProductFactory(stock_code="RES-B", shop_quantity=5)
        placed = place(shop_client, order_body(line(first, 2), line(second, 1), number="W-9"))
        assert placed.status_code == 201
        return Order.objects.get(pk=placed.json()["order_id"])

    def test_the_page_shows_each_reservation_and_its_state(self, admin_client, order):
        response = admin_client.get(reverse("admin:orders_order_change", args=[order.pk]))

        assert response.status_code == 200
        html = response.content.decode()
        for reservation in order.reservations.select_related("product"):
            link = reverse("admin:catalog_product_change", args=(reservation.product_id,))
            product = reservation.product
            assert (
                f'<a href="{link}"><span class="identifier">{product.stock_code}</span> / '
                f'<span class="identifier">{product.ean}</span></a>'
            ) in html
        assert _states(html) == ["Open", "Open"]

    def test_a_cancelled_order_shows_its_reservations_released(
        self, admin_client, shop_client, order
    ):
        from tests.shop.helpers import cancel_url

        assert shop_client.post(cancel_url(order.pk), {}, format="json").status_code == 200

        response = admin_client.get(reverse("admin:orders_order_change", args=[order.pk]))

        html = response.content.decode()
        assert _states(html) == ["Released", "Released"]
        assert "cancelled by the shop" in html


def _allocations(html: str) -> list[list[str]]:
    """Each line's allocations as the order's page shows them, in the lines' order."""
    cells = re.findall(r'<td class="field-allocations">\s*<p>(.*?)</p>', html, re.S)
    return [re.findall(r'<span class="allocation">(.*?)</span>', cell) for cell in cells]


class TestAllocationsOfAnOrder:
    """The order's page shows each line's allocations (warehouse, units) and their state."""

    def test_each_line_shows_its_parts_in_the_order_taken_and_what_became_of_them(
        self, admin_client, shop_client, api_client
    ):
        from stock.warehouses import warehouse_save
        from tests.factories import set_level

        east, _ = warehouse_save("EAST", priority=10)
        west, _ = warehouse_save("WEST", priority=20)
        split = ProductFactory(shop_quantity=0)
        set_level(split, east, 3)
        set_level(split, west, 4)
        whole = ProductFactory(shop_quantity=4)
        placed = place(shop_client, order_body(line(split, 5), line(whole, 2), number="W-A"))
        assert placed.status_code == 201
        order_id = placed.json()["order_id"]
        page = reverse("admin:orders_order_change", args=[order_id])

        html = admin_client.get(page).content.decode()
        assert _allocations(html) == [
            ["EAST × 3 <small>(Open)</small>", "WEST × 2 <small>(Open)</small>"],
            ["MAIN × 2 <small>(Open)</small>"],
        ]
        # The reservations below say the warehouse of each part too.
        assert re.findall(r'<td class="field-warehouse">\s*<p><a [^>]*>(\w+)</a></p>', html) == [
            "EAST",
            "WEST",
            "MAIN",
        ]

        acknowledged = api_client.post(
            ack_url(order_id), {"partner_reference": "FA-A"}, format="json"
        )
        assert acknowledged.status_code == 200
        cancelled = api_client.post(
            f"/api/v1/partner/orders/{order_id}/status", {"status": "cancelled"}, format="json"
        )
        assert cancelled.status_code == 200
        html = admin_client.get(page).content.decode()
        assert _allocations(html) == [
            ["EAST × 3 <small>(Released)</small>", "WEST × 2 <small>(Released)</small>"],
            ["MAIN × 2 <small>(Released)</small>"],
        ]

    def test_an_imported_order_shows_none(self, admin_client):
        order = order_with_items(2)

        html = admin_client.get(reverse("admin:orders_order_change", args=[order.pk])).content
        cells = re.findall(r'<td class="field-allocations">\s*<p>(.*?)</p>', html.decode(), re.S)
        assert cells == ["-", "-"]


class TestStatusHistory:
    """The order's page shows who moved it, when, from what to what, and its tracking."""

    def test_the_change_page_shows_the_history_and_the_tracking(
        self, admin_client, shop_client, api_client
    ):
        product = ProductFactory(shop_quantity=5)
        order_id = place(shop_client, order_body(line(product, 1), number="W-H1")).json()[
            "order_id"
        ]
        api_client.post(ack_url(order_id), {"partner_reference": "FA-H1"}, format="json")
        api_client.post(
            f"/api/v1/partner/orders/{order_id}/status",
            {
                "status": "shipped",
                "carrier": "PPL",
                "tracking_number": "PPL-555",
                "tracking_url": "https://t.example.com/PPL-555",
            },
            format="json",
        )

        response = admin_client.get(reverse("admin:orders_order_change", args=[order_id]))

        assert response.status_code == 200
        page = response.content.decode()
        assert "Status history" in page
        for text in (
            "Shop (storefront)",
            "placed as new",
            "Partner system (erp)",
            "pending_partner → acknowledged",
            "new → shipped",
            "PPL-555",
            "https://t.example.com/PPL-555",
            "delivered",  # what the partner system may report next
        ):
            assert text in page, text

    def test_first_entries_say_how_the_order_began_never_none(self, admin_client, shop_client):
        product = ProductFactory(shop_quantity=5)
        order_id = place(shop_client, order_body(line(product, 1), number="W-H3")).json()[
            "order_id"
        ]
        legacy = OrderFactory(legacy=True)
        run_action(admin_client, "hand_to_partner", [legacy], confirm=True)

        placed = admin_client.get(reverse("admin:orders_order_change", args=[order_id]))
        handed = admin_client.get(reverse("admin:orders_order_change", args=[legacy.pk]))

        assert _changes(placed.content.decode()) == ["placed as new"]
        assert _changes(handed.content.decode()) == ["set to pending_partner"]
        # Nor does the line above each row (the change in short).
        for page in (placed, handed):
            assert "None" not in page.content.decode()
        assert "status: placed as new (shop)" in placed.content.decode()

    @staticmethod
    def _edit_status(admin_client, order, status):
        url = reverse("admin:orders_order_change", args=[order.pk])
        form = admin_client.get(url).context["adminform"].form
        data = {
            key: ("" if value is None else value)
            for key, value in form.initial.items()
            if key in form.fields
        }
        data.update(
            {
                "status": status,
                "created_at_0": order.created_at.strftime("%Y-%m-%d"),
                "created_at_1": order.created_at.strftime("%H:%M:%S"),
                "items-TOTAL_FORMS": "0",
                "items-INITIAL_FORMS": "0",
                "status_changes-TOTAL_FORMS": "0",
                "status_changes-INITIAL_FORMS": "0",
            }
        )

        response = admin_client.post(url, data)
        assert response.status_code == 302, response.context["adminform"].form.errors

    def test_a_staff_edit_of_the_status_is_kept_in_the_history(self, admin_client, admin_user):
        order = OrderFactory(acknowledged=True, status="new")
        url = reverse("admin:orders_order_change", args=[order.pk])

        self._edit_status(admin_client, order, "shipped")

        order.refresh_from_db()
        assert order.status == "shipped"
        assert order.status_changed_at is not None
        change = order.status_changes.get(field="status")
        assert (change.old_value, change.new_value, change.by, change.by_name) == (
            "new",
            "shipped",
            "staff",
            admin_user.get_username(),
        )
        page = admin_client.get(url).content.decode()
        assert f"Staff ({admin_user.get_username()})" in page

    def test_a_staff_cancellation_gives_the_reserved_stock_back(
        self, admin_client, shop_client, api_client
    ):
        product = ProductFactory(shop_quantity=5)
        order_id = place(shop_client, order_body(line(product, 2), number="W-H2")).json()[
            "order_id"
        ]
        api_client.post(ack_url(order_id), {"partner_reference": "FA-H2"}, format="json")
        product.refresh_from_db()
        assert product.reserved == 2

        self._edit_status(admin_client, Order.objects.get(pk=order_id), "cancelled")

        product.refresh_from_db()
        assert (product.reserved, product.salable) == (0, 5)
        assert Order.objects.get(pk=order_id).status == "cancelled"
