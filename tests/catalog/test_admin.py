"""The staff back-office: dashboard, pause switch, products, pending keys, audits, permissions."""

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit, SyncControl
from stock.models import Reservation
from sync.pause import sync_pause_set
from tests.factories import PendingProductFactory, ProductFactory
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db

OPERATORS = "sync operators"


def _audit(**fields) -> SyncAudit:
    values = {
        "endpoint": SyncAudit.Endpoint.BATCH,
        "outcome": SyncAudit.Outcome.APPLIED,
        "status_code": 200,
    }
    values.update(fields)
    return SyncAudit.objects.create(**values)


def _cell(response, element_id: str) -> str:
    """The text of the dashboard cell with that id, tags and extra whitespace removed."""
    html = response.content.decode()
    match = re.search(rf'<td id="{element_id}">(.*?)</td>', html, re.S)
    assert match, f"no #{element_id} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


@pytest.fixture
def boss(db) -> User:
    return User.objects.create_superuser("boss", "boss@example.com", "x")


@pytest.fixture
def boss_client(boss) -> Client:
    client = Client()
    client.force_login(boss)
    return client


@pytest.fixture
def operator(db) -> User:
    user = User.objects.create_user("olga", "olga@example.com", "x", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    return user


@pytest.fixture
def operator_client(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def _sync(api_client, *items, request_id=None):
    body = {"products": list(items), "request_id": request_id}
    return api_client.post(
        reverse("partner_api:products-sync"), data=json.dumps(body), content_type="application/json"
    )


def _item(stock_code, **fields):
    return {
        "stock_code": stock_code,
        "status": "active",
        "shop_quantity": 5,
        "catalog_price": 100,
        "eshop_price": 90,
        **fields,
    }


class TestAnonymous:
    @pytest.mark.parametrize(
        "url_name",
        [
            "admin:index",
            "admin:catalog_product_changelist",
            "admin:catalog_pendingproduct_changelist",
            "admin:catalog_syncaudit_changelist",
            "admin:catalog_producthistory_changelist",
        ],
    )
    def test_is_sent_to_the_login(self, client, url_name):
        url = reverse(url_name)
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"{reverse('admin:login')}?next={url}"

    def test_cannot_pause(self, client):
        response = client.post(reverse("admin:catalog_synccontrol_switch"), {"paused": "true"})
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
        assert not SyncControl.objects.filter(paused=True).exists()


class TestDashboard:
    def test_shows_the_figures(self, boss_client):
        PendingProductFactory.create_batch(2)
        PendingProductFactory(state=PendingProduct.State.RESOLVED)
        oldest = timezone.now() - timedelta(days=3)
        OrderFactory(created_at=oldest)
        OrderFactory(created_at=timezone.now() - timedelta(hours=1))
        OrderFactory(acknowledged=True, created_at=oldest - timedelta(days=1))
        accepted = _audit(created_at=timezone.now() - timedelta(minutes=5))
        _audit(created_at=timezone.now() - timedelta(minutes=1), outcome=SyncAudit.Outcome.PAUSED)
        _audit(outcome=SyncAudit.Outcome.REFUSED, status_code=400)
        _audit(
            outcome=SyncAudit.Outcome.REFUSED,
            status_code=400,
            created_at=timezone.now() - timedelta(hours=30),
        )

        response = boss_client.get(reverse("admin:index"))

        assert response.status_code == 200
        assert _cell(response, "dash-pending-open") == "2"
        assert _cell(response, "dash-orders-waiting").startswith("2 oldest waits for 3")
        last_sync = _cell(response, "dash-last-sync")
        assert last_sync.startswith(timezone.localtime(accepted.created_at).strftime("%Y-%m-%d"))
        assert last_sync.endswith("5 minutes ago")
        assert _cell(response, "dash-refused") == "1"
        assert _cell(response, "dash-switch-state") == "Running"

    def test_empty_system(self, boss_client):
        response = boss_client.get(reverse("admin:index"))

        assert _cell(response, "dash-pending-open") == "0"
        assert _cell(response, "dash-orders-waiting") == "0"
        assert _cell(response, "dash-last-sync") == "never"
        assert _cell(response, "dash-refused") == "0"

    def test_shows_who_paused_and_why(self, boss_client):
        sync_pause_set(paused=True, by="marta", reason="stock take")

        response = boss_client.get(reverse("admin:index"))

        state = _cell(response, "dash-switch-state")
        assert state.startswith("Paused by marta at ")
        assert state.endswith(": stock take")
        assert "Resume synchronization" in response.content.decode()

    def test_operator_sees_the_figures_but_not_the_switch(self, operator_client):
        response = operator_client.get(reverse("admin:index"))

        assert _cell(response, "dash-pending-open") == "0"
        assert 'id="sync-switch"' not in response.content.decode()


class TestPauseSwitch:
    def test_pause_then_the_api_answers_success_false(self, boss_client, api_client):
        response = boss_client.post(
            reverse("admin:catalog_synccontrol_switch"),
            {"paused": "true", "reason": " stock take "},
        )

        assert response.status_code == 302
        assert response["Location"] == reverse("admin:index")
        control = SyncControl.objects.get(pk=1)
        assert (control.paused, control.changed_by, control.reason) == (True, "boss", "stock take")
        product = ProductFactory(stock_code="P-1", ean="", shop_quantity=1)
        body = _sync(api_client, _item("P-1", shop_quantity=9)).json()
        assert body["success"] is False
        product.refresh_from_db()
        assert product.shop_quantity == 1

    def test_resume(self, boss_client, api_client):
        sync_pause_set(paused=True, by="marta", reason="stock take")

        boss_client.post(reverse("admin:catalog_synccontrol_switch"), {"paused": "false"})

        control = SyncControl.objects.get(pk=1)
        assert (control.paused, control.changed_by) == (False, "boss")
        assert _sync(api_client, _item("P-2")).json()["success"] is True

    def test_needs_the_csrf_token(self, boss):
        client = Client(enforce_csrf_checks=True)
        client.force_login(boss)

        response = client.post(reverse("admin:catalog_synccontrol_switch"), {"paused": "true"})

        assert response.status_code == 403
        assert not SyncControl.objects.filter(paused=True).exists()

    def test_the_dashboard_form_carries_the_token(self, boss):
        client = Client(enforce_csrf_checks=True)
        client.force_login(boss)
        page = client.get(reverse("admin:index")).content.decode()
        token = re.search(
            r'id="sync-switch">\s*<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)"',
            page,
        ).group(1)

        response = client.post(
            reverse("admin:catalog_synccontrol_switch"),
            {"paused": "true", "csrfmiddlewaretoken": token},
        )

        assert response.status_code == 302
        assert SyncControl.objects.get(pk=1).paused is True

    def test_only_post(self, boss_client):
        assert boss_client.get(reverse("admin:catalog_synccontrol_switch")).status_code == 405

    def test_operator_may_not_pause(self, operator_client):
        response = operator_client.post(
            reverse("admin:catalog_synccontrol_switch"), {"paused": "true"}
        )

        assert response.status_code == 403
        assert response["Content-Type"].startswith("application/json")
        assert not SyncControl.objects.filter(paused=True).exists()

    @pytest.mark.parametrize(
        "form", [{}, {"paused": "maybe"}, {"paused": "1", "reason": "x" * 256}]
    )
    def test_a_bad_form_changes_nothing(self, boss_client, form):
        response = boss_client.post(reverse("admin:catalog_synccontrol_switch"), form, follow=True)

        assert response.status_code == 200
        assert "The switch was not changed" in response.content.decode()
        assert not SyncControl.objects.exists()


class TestProducts:
    def test_search_by_stock_code_ean_name_and_brand(self, boss_client):
        ProductFactory(stock_code="ALPHA-1", ean="8591111111111", name="Ice Grip", brand="Velox")
        ProductFactory(stock_code="BETA-2", ean="8592222222222", name="Sun Road", brand="Nordway")
        url = reverse("admin:catalog_product_changelist")

        for term in ("ALPHA", "8591111111111", "Ice Grip", "Velox"):
            page = boss_client.get(url, {"q": term}).content.decode()
            assert "ALPHA-1" in page, term
            assert "BETA-2" not in page, term

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ({"brand": "Velox"}, "F-VELOX"),
            ({"season": "winter"}, "F-WINTER"),
            ({"status": "inactive"}, "F-INACTIVE"),
            ({"discontinued__exact": "1"}, "F-DISC"),
            ({"on_promotion__exact": "1"}, "F-PROMO"),
        ],
    )
    def test_filters(self, boss_client, query, expected):
        ProductFactory(stock_code="F-VELOX", brand="Velox")
        ProductFactory(stock_code="F-WINTER", season="winter")
        ProductFactory(stock_code="F-INACTIVE", status="inactive")
        ProductFactory(stock_code="F-DISC", discontinued=True)
        ProductFactory(stock_code="F-PROMO", on_promotion=True)

        response = boss_client.get(reverse("admin:catalog_product_changelist"), query)

        assert response.status_code == 200
        assert list(response.context["cl"].result_list.values_list("stock_code", flat=True)) == [
            expected
        ]

    def test_erp_fields_are_read_only_on_the_product_page(self, boss_client):
        product = ProductFactory(shop_quantity=4, name="Old name")
        url = reverse("admin:catalog_product_change", args=(product.pk,))
        page = boss_client.get(url).content.decode()
        for name in (
            "stock_code",
            "ean",
            "status",
            "shop_quantity",
            "catalog_price",
            "eshop_price",
        ):
            assert f'name="{name}"' not in page, name
        assert 'name="name"' in page

        response = boss_client.post(
            url, {"name": "New name", "shop_quantity": "999", "eshop_price": "1"}
        )

        assert response.status_code == 302
        product.refresh_from_db()
        assert (product.name, product.shop_quantity, product.eshop_price) == (
            "New name",
            4,
            Decimal("90.00"),
        )

    def test_history_on_the_product_page_links_to_its_audit(self, boss_client, api_client):
        product = ProductFactory(
            stock_code="H-1", ean="8593333333333", shop_quantity=1, eshop_price=Decimal("90")
        )
        _sync(
            api_client,
            _item("H-1", ean="8593333333333", shop_quantity=3, eshop_price=80),
            request_id="DOC-7",
        )
        audit = SyncAudit.objects.get(request_id="DOC-7")

        page = boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))

        html = page.content.decode()
        audit_url = reverse("admin:catalog_syncaudit_change", args=(audit.pk,))
        # The price's change in the history, linked to its audit.
        history = re.search(r'<table class="product-history">.*?</table>', html, re.S).group(0)
        assert audit_url in history
        assert f"#{audit.pk} DOC-7" in history
        assert "On hand (partner system)" in html
        # The quantity's change in the movements, linked to the same audit and its request_id.
        movements = re.search(r'<table class="stock-movements">.*?</table>', html, re.S).group(0)
        assert audit_url in movements
        assert "DOC-7" in movements

    def test_adding_a_product_resolves_its_pending_key(self, boss_client, api_client):
        _sync(api_client, _item("NEW-9", ean="8594444444444", shop_quantity=6), request_id="D-9")
        form = {
            "stock_code": "NEW-9",
            "ean": "8594444444444",
            "status": "active",
            "shop_quantity": "0",
            "catalog_price": "10",
            "eshop_price": "9",
            "name": "Added by hand",
        }

        response = boss_client.post(reverse("admin:catalog_product_add"), form, follow=True)

        assert response.status_code == 200
        assert "Resolved 1 pending key(s)" in response.content.decode()
        product = Product.objects.get(stock_code="NEW-9")
        assert (product.shop_quantity, product.catalog_price) == (6, Decimal("100"))
        pending = PendingProduct.objects.get(stock_code="NEW-9")
        assert (pending.state, pending.resolved_by, pending.resolved_product) == (
            PendingProduct.State.RESOLVED,
            "boss",
            product,
        )


class TestPendingKeys:
    def test_list_and_page_show_what_staff_need(self, boss_client):
        pending = PendingProductFactory(
            stock_code="PK-1",
            reason=PendingProduct.Reason.AMBIGUOUS,
            times_seen=4,
            last_request_id="DOC-42",
            payload={"stock_code": "PK-1", "name": "Ice <b>Grip</b>"},
        )

        listing = boss_client.get(reverse("admin:catalog_pendingproduct_changelist")).content
        page = boss_client.get(
            reverse("admin:catalog_pendingproduct_change", args=(pending.pk,))
        ).content.decode()

        assert b"PK-1" in listing
        assert b"DOC-42" in listing
        assert b"Ambiguous key" in listing
        assert '<pre class="pending-payload">' in page
        assert "&quot;name&quot;: &quot;Ice &lt;b&gt;Grip&lt;/b&gt;&quot;" in page
        assert "DOC-42" in page

    def test_create_products_action(self, operator_client, api_client):
        _sync(api_client, _item("ACT-1", ean="8595555555555", name="From ERP"))
        pending = PendingProduct.objects.get(stock_code="ACT-1")

        response = operator_client.post(
            reverse("admin:catalog_pendingproduct_changelist"),
            {"action": "create_products", "_selected_action": [pending.pk]},
            follow=True,
        )

        assert response.status_code == 200
        assert "Created 1 product(s)" in response.content.decode()
        product = Product.objects.get(stock_code="ACT-1")
        assert product.name == "From ERP"
        pending.refresh_from_db()
        assert (pending.state, pending.resolved_by) == (PendingProduct.State.RESOLVED, "olga")

    def test_dismiss_action(self, operator_client):
        pending = PendingProductFactory()

        operator_client.post(
            reverse("admin:catalog_pendingproduct_changelist"),
            {"action": "dismiss", "_selected_action": [pending.pk]},
        )

        pending.refresh_from_db()
        assert (pending.state, pending.resolved_by) == (PendingProduct.State.DISMISSED, "olga")

    def test_a_viewer_without_resolve_permission_gets_no_actions(self):
        viewer = User.objects.create_user("vic", "v@example.com", "x", is_staff=True)
        viewer.user_permissions.add(
            *Group.objects.get(name=OPERATORS).permissions.filter(codename__startswith="view_")
        )
        pending = PendingProductFactory()
        client = Client()
        client.force_login(viewer)

        response = client.post(
            reverse("admin:catalog_pendingproduct_changelist"),
            {"action": "dismiss", "_selected_action": [pending.pk]},
        )

        pending.refresh_from_db()
        assert pending.state == PendingProduct.State.OPEN
        assert response.status_code == 200


class TestAudits:
    def test_filters_and_search(self, boss_client):
        _audit(request_id="DOC-A", source_type="stock_receipt", source_ref="PR-1")
        _audit(
            request_id="DOC-B",
            outcome=SyncAudit.Outcome.REFUSED,
            status_code=400,
            endpoint=SyncAudit.Endpoint.ITEM,
            source_type="customer_sale",
            source_ref="SALE-9",
        )
        url = reverse("admin:catalog_syncaudit_changelist")

        def request_ids(query):
            response = boss_client.get(url, query)
            assert response.status_code == 200
            return sorted(response.context["cl"].result_list.values_list("request_id", flat=True))

        assert request_ids({"outcome__exact": "refused"}) == ["DOC-B"]
        assert request_ids({"endpoint__exact": "products_sync"}) == ["DOC-A"]
        assert request_ids({"source_type": "stock_receipt"}) == ["DOC-A"]
        # As the admin's date filter writes it: aware start of today and of tomorrow.
        today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
        assert request_ids(
            {"created_at__gte": str(today), "created_at__lt": str(today + timedelta(days=1))}
        ) == ["DOC-A", "DOC-B"]
        assert request_ids({"q": "DOC-B"}) == ["DOC-B"]
        assert request_ids({"q": "PR-1"}) == ["DOC-A"]

    def test_links_to_the_history_it_produced(self, boss_client, api_client):
        ProductFactory(stock_code="AH-1", ean="", shop_quantity=1)
        _sync(api_client, _item("AH-1", shop_quantity=2, eshop_price=50), request_id="DOC-H")
        audit = SyncAudit.objects.get(request_id="DOC-H")

        page = boss_client.get(reverse("admin:catalog_syncaudit_change", args=(audit.pk,)))
        history_url = reverse("admin:catalog_producthistory_changelist")
        assert f"{history_url}?audit__id__exact={audit.pk}" in page.content.decode()
        assert "1 change(s)" in page.content.decode()
        # The quantity's change is a stock movement, linked from the audit's page as well.
        movements_url = reverse("admin:stock_stockmovement_changelist")
        assert f"{movements_url}?sync_audit__id__exact={audit.pk}" in page.content.decode()
        assert "1 movement(s)" in page.content.decode()

        listing = boss_client.get(history_url, {"audit__id__exact": audit.pk})
        assert sorted(listing.context["cl"].result_list.values_list("field", flat=True)) == [
            "eshop_price",
        ]
        moved = boss_client.get(movements_url, {"sync_audit__id__exact": audit.pk})
        assert moved.status_code == 200
        assert list(
            moved.context["cl"].result_list.values_list("kind", "before", "after", "reason")
        ) == [("quantity", 1, 2, "sync")]

    @pytest.mark.parametrize("who", ["boss_client", "operator_client"])
    def test_nobody_adds_changes_or_deletes_an_audit(self, request, who):
        client = request.getfixturevalue(who)
        audit = _audit(request_id="DOC-R")
        change_url = reverse("admin:catalog_syncaudit_change", args=(audit.pk,))

        page = client.get(change_url)
        assert page.status_code == 200
        assert 'name="_save"' not in page.content.decode()
        assert client.post(change_url, {"request_id": "FORGED"}).status_code == 403
        assert client.get(reverse("admin:catalog_syncaudit_add")).status_code == 403
        delete_url = reverse("admin:catalog_syncaudit_delete", args=(audit.pk,))
        assert client.post(delete_url, {"post": "yes"}).status_code == 403
        audit.refresh_from_db()
        assert audit.request_id == "DOC-R"

    def test_operator_cannot_change_history_or_keys(self, operator_client):
        product = ProductFactory()
        row = ProductHistory.objects.create(
            product=product, field="shop_quantity", old_value="1", new_value="2"
        )
        pending = PendingProductFactory()

        row_url = reverse("admin:catalog_producthistory_change", args=(row.pk,))
        assert operator_client.post(row_url, {"new_value": "9"}).status_code == 403
        pending_url = reverse("admin:catalog_pendingproduct_change", args=(pending.pk,))
        assert operator_client.post(pending_url, {"state": "dismissed"}).status_code == 403
        product_url = reverse("admin:catalog_product_change", args=(product.pk,))
        assert operator_client.post(product_url, {"name": "x"}).status_code == 403
        assert (
            operator_client.get(reverse("admin:rest_framework_api_key_apikey_add")).status_code
            == 403
        )
        row.refresh_from_db()
        pending.refresh_from_db()
        assert (row.new_value, pending.state) == ("2", PendingProduct.State.OPEN)


@pytest.mark.parametrize(
    ("url_name", "query"),
    [
        ("admin:catalog_product_changelist", {"brand": "Vel\x00ox"}),
        ("admin:catalog_product_changelist", {"q": "\x00"}),
        ("admin:catalog_syncaudit_changelist", {"source_type": "\x00"}),
        ("admin:catalog_pendingproduct_changelist", {"last_request_id": "\x00"}),
        ("admin:catalog_producthistory_changelist", {"source": "\x00"}),
        ("admin:orders_order_changelist", {"q": "A\x00"}),
        ("admin:plants_plant_changelist", {"q": "\x00"}),
        ("admin:auth_user_changelist", {"q": "\x00"}),
        ("admin:rest_framework_api_key_apikey_changelist", {"q": "\x00"}),
    ],
)
def test_a_nul_character_in_a_filter_is_a_bad_filter_not_an_error(boss_client, url_name, query):
    url = reverse(url_name)

    response = boss_client.get(url, query)

    assert response.status_code == 302
    assert response["Location"] == f"{url}?e=1"


def test_a_nul_character_in_the_pause_reason_changes_nothing(boss_client):
    response = boss_client.post(
        reverse("admin:catalog_synccontrol_switch"), {"paused": "true", "reason": "a\x00b"}
    )

    assert response.status_code == 302
    assert not SyncControl.objects.exists()


def test_operators_group_permissions():
    codenames = set(
        Group.objects.get(name=OPERATORS).permissions.values_list("codename", flat=True)
    )

    assert {"view_syncaudit", "view_producthistory", "view_product", "view_order"} <= codenames
    assert {"change_pendingproduct", "add_product"} <= codenames
    assert (
        not {
            "change_syncaudit",
            "delete_syncaudit",
            "change_producthistory",
            "change_apikey",
            "add_apikey",
            "change_synccontrol",
        }
        & codenames
    )


@pytest.mark.parametrize(
    ("url_name", "query"),
    [
        ("admin:catalog_product_changelist", {"stock_code__regex": "("}),
        ("admin:catalog_product_changelist", {"name__iregex": "[a-"}),
        ("admin:catalog_product_changelist", {"stock_code__contains": "A"}),
        ("admin:catalog_product_changelist", {"updated_at__hour": "3"}),
        ("admin:catalog_pendingproduct_changelist", {"stock_code__regex": "*"}),
        ("admin:orders_order_changelist", {"partner_reference__regex": "("}),
        ("admin:plants_plant_changelist", {"name__regex": "("}),
        ("admin:auth_user_changelist", {"username__regex": "("}),
    ],
)
def test_a_lookup_the_admin_does_not_offer_is_a_bad_filter_not_an_error(
    boss_client, url_name, query
):
    ProductFactory(stock_code="A-1")
    url = reverse(url_name)

    response = boss_client.get(url, query)

    assert response.status_code == 302
    assert response["Location"] == f"{url}?e=1"


@pytest.mark.parametrize(
    "query",
    [
        {"status__exact": "active"},
        {"discontinued__isnull": "False"},
        {
            "updated_at__gte": "2020-01-01 00:00:00+00:00",
            "updated_at__lt": "2999-01-01 00:00:00+00:00",
        },
        {"o": "1", "p": "0", "q": "A"},
    ],
)
def test_the_admin_s_own_filters_still_apply(boss_client, query):
    ProductFactory(stock_code="A-1", status="active")

    response = boss_client.get(reverse("admin:catalog_product_changelist"), query)

    assert response.status_code == 200


class TestDocumentTimes:
    def test_product_page_shows_posted_at_and_the_document_time_of_each_change(
        self, boss_client, api_client
    ):
        product = ProductFactory(
            stock_code="PT-1", ean="", shop_quantity=1, eshop_price=Decimal("90")
        )
        body = {
            "products": [_item("PT-1", shop_quantity=3, eshop_price=80)],
            "request_id": "DOC-T",
            "sync_context": {"source_type": "stock_receipt", "posted_at": "2026-01-31T08:15:00Z"},
        }
        response = api_client.post(
            reverse("partner_api:products-sync"),
            data=json.dumps(body),
            content_type="application/json",
        )
        assert response.status_code == 200

        page = boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))

        html = page.content.decode()
        assert "Document posted at" in html
        # The quantity's change is a movement: when, warehouse, what, before, after, reason,
        # then its source with the document time.
        row = re.search(r'<table class="stock-movements">.*?<tbody>(.*?)</tbody>', html, re.S)
        cells = re.findall(r"<td>(.*?)</td>", row.group(1))
        assert cells[1:6] == ["MAIN", "Quantity", "1", "3", "Sync"]
        assert "document of 2026-01-31 08:15:00 UTC" in cells[6]
        assert "DOC-T" in cells[6]
        # The price's history row: when it changed, then the document time, then the field.
        row = re.search(r'<table class="product-history">.*?<tbody>(.*?)</tbody>', html, re.S)
        cells = re.findall(r"<td>(.*?)</td>", row.group(1))
        assert cells[1] == "2026-01-31 08:15:00 UTC"
        assert (cells[3], cells[4]) == ("90", "80")
        # The product's own posted_at, read-only.
        assert "Jan. 31, 2026, 8:15 a.m." in html or "2026-01-31" in html

    def test_audits_show_the_stale_count_and_filter_dry_runs(self, boss_client):
        _audit(request_id="DOC-REAL", stale_products=2)
        _audit(request_id="DOC-DRY", outcome=SyncAudit.Outcome.DRY_RUN, stale_products=0)
        url = reverse("admin:catalog_syncaudit_changelist")

        response = boss_client.get(url, {"outcome__exact": "dry_run"})

        assert response.status_code == 200
        assert list(response.context["cl"].result_list.values_list("request_id", flat=True)) == [
            "DOC-DRY"
        ]
        html = boss_client.get(url).content.decode()
        assert "received / updated / unknown / stale" in html
        assert "0 / 0 / 0 / 2" in html
        assert "Dry run" in html  # the outcome filter offers it
        audit = SyncAudit.objects.get(request_id="DOC-REAL")
        page = boss_client.get(reverse("admin:catalog_syncaudit_change", args=(audit.pk,)))
        assert "Stale products" in page.content.decode()


class TestShopStock:
    """On hand, reserved, salable and buffer; the open reservations behind `reserved`."""

    @pytest.fixture
    def placed(self, shop_client, api_client):
        """Two shop orders on one product (3 and 2 units), the first acknowledged."""
        from tests.shop.helpers import ack_url, line, order_body, place

        product = ProductFactory(stock_code="RES-1", shop_quantity=10, safety_buffer=1)
        other = ProductFactory(stock_code="FREE-1", shop_quantity=4)
        first = place(shop_client, order_body(line(product, 3), number="W-501"))
        second = place(shop_client, order_body(line(product, 2), number="W-502"))
        assert (first.status_code, second.status_code) == (201, 201)
        booked = api_client.post(
            ack_url(first.json()["order_id"]),
            {"partner_reference": "FA-501", "stock_booked_at": "2026-01-05T10:00:00+00:00"},
            format="json",
        )
        assert booked.status_code == 200
        return product, other

    def test_the_list_shows_on_hand_reserved_salable_and_buffer(self, boss_client, placed):
        response = boss_client.get(reverse("admin:catalog_product_changelist"))

        assert response.status_code == 200
        html = response.content.decode()
        for header in ("On hand (partner system)", "Reserved", "Salable", "Buffer"):
            assert header in html
        rows = {
            p.stock_code: (p.shop_quantity, p.reserved, p.salable)
            for p in response.context["cl"].result_list
        }
        assert rows == {"RES-1": (10, 5, 4), "FREE-1": (4, 0, 4)}
        assert re.search(r'<td class="field-buffer_display">1</td>', html)
        # No buffer of its own: the default, marked as such.
        assert re.search(r'<td class="field-buffer_display"><span title="[^"]*">0\*</span>', html)

    @pytest.mark.parametrize(("value", "expected"), [("yes", {"RES-1"}), ("no", {"FREE-1"})])
    def test_filter_products_with_open_reservations(self, boss_client, placed, value, expected):
        response = boss_client.get(
            reverse("admin:catalog_product_changelist"), {"open_reservations": value}
        )

        assert response.status_code == 200
        assert {p.stock_code for p in response.context["cl"].result_list} == expected

    def test_the_page_shows_the_figures_and_each_open_reservation(self, boss_client, placed):
        product, _ = placed
        response = boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))

        assert response.status_code == 200
        html = response.content.decode()
        assert re.search(r"Reserved:</label>\s*<div class=\"readonly\">5</div>", html)
        assert re.search(r"Salable:</label>\s*<div class=\"readonly\">4</div>", html)
        assert "STOCK_SAFETY_BUFFER = 0" in html
        for number in ("W-501", "W-502"):
            order = product.reservations.get(order__order_number=number).order
            link = reverse("admin:orders_order_change", args=(order.pk,))
            assert f'<a href="{link}">{number}</a>' in html
        # The booked one with its time, the other not booked yet.
        assert "Jan. 5, 2026" in html or "2026-01-05" in html

    def test_released_reservations_are_not_shown_as_open(self, boss_client, shop_client, placed):
        from tests.shop.helpers import cancel_url

        product, _ = placed
        second = product.reservations.get(order__order_number="W-502").order
        assert shop_client.post(cancel_url(second.pk), {}, format="json").status_code == 200

        response = boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))

        html = response.content.decode()
        # The open reservations' inline (the movements above it name both orders).
        open_reservations = re.search(
            r'<div class="js-inline-admin-formset inline-group" id="reservations-group".*?</fieldset>',
            html,
            re.S,
        ).group(0)
        assert "W-501" in open_reservations
        assert "W-502" not in open_reservations
        assert re.search(r"Reserved:</label>\s*<div class=\"readonly\">3</div>", html)

    def test_staff_set_the_buffer_and_empty_means_the_default(self, boss_client, placed, settings):
        product, _ = placed
        settings.STOCK_SAFETY_BUFFER = 2
        url = reverse("admin:catalog_product_change", args=(product.pk,))
        form = _product_form(boss_client, url)

        form["safety_buffer"] = "4"
        assert boss_client.post(url, form).status_code == 302
        product.refresh_from_db()
        assert (product.safety_buffer, product.salable) == (4, 1)

        form["safety_buffer"] = ""
        assert boss_client.post(url, form).status_code == 302
        product.refresh_from_db()
        assert (product.safety_buffer, product.salable) == (None, 3)

    def test_a_negative_buffer_is_refused(self, boss_client, placed):
        product, _ = placed
        url = reverse("admin:catalog_product_change", args=(product.pk,))
        form = _product_form(boss_client, url)
        form["safety_buffer"] = "-1"

        response = boss_client.post(url, form)

        assert response.status_code == 200
        assert response.context["adminform"].form.errors["safety_buffer"]
        product.refresh_from_db()
        assert product.safety_buffer == 1

    def test_the_reservations_list_filters_and_searches(self, boss_client, placed):
        url = reverse("admin:stock_reservation_changelist")

        def listed(query):
            response = boss_client.get(url, query)
            assert response.status_code == 200
            return sorted(r.order.order_number for r in response.context["cl"].result_list)

        assert listed({}) == ["W-501", "W-502"]
        assert listed({"state__exact": "open"}) == ["W-501", "W-502"]
        assert listed({"state__exact": "consumed"}) == []
        assert listed({"q": "W-502"}) == ["W-502"]
        assert listed({"q": "RES-1"}) == ["W-501", "W-502"]
        assert listed({"q": "FREE-1"}) == []

    def test_a_consumed_reservation_names_its_sync(self, boss_client, api_client, placed):
        product, _ = placed
        synced = _sync(
            api_client,
            {**_item("RES-1", shop_quantity=7), "ean": product.ean},
        )
        assert synced.status_code == 200
        reservation = Reservation.objects.get(order__order_number="W-501")
        assert reservation.state == Reservation.State.CONSUMED

        page = boss_client.get(reverse("admin:stock_reservation_change", args=(reservation.pk,)))

        assert page.status_code == 200
        html = page.content.decode()
        assert "Consumed" in html
        audit_url = reverse("admin:catalog_syncaudit_change", args=(reservation.sync_audit_id,))
        assert audit_url in html

    def test_nobody_adds_changes_or_deletes_a_reservation(
        self, boss_client, operator_client, placed
    ):
        reservation = Reservation.objects.get(order__order_number="W-502")
        change_url = reverse("admin:stock_reservation_change", args=(reservation.pk,))
        for client in (boss_client, operator_client):
            page = client.get(change_url)
            assert page.status_code == 200
            assert 'name="_save"' not in page.content.decode()
            assert (
                client.post(change_url, {"quantity": "99", "state": "released"}).status_code == 403
            )
            assert client.get(reverse("admin:stock_reservation_add")).status_code == 403
            delete_url = reverse("admin:stock_reservation_delete", args=(reservation.pk,))
            assert client.post(delete_url, {"post": "yes"}).status_code == 403
        reservation.refresh_from_db()
        assert (reservation.quantity, reservation.state) == (2, Reservation.State.OPEN)

    def test_an_operator_sees_the_stock_but_changes_neither_buffer_nor_reservations(
        self, operator_client, placed
    ):
        product, _ = placed
        url = reverse("admin:catalog_product_change", args=(product.pk,))
        page = operator_client.get(url)
        assert page.status_code == 200
        html = page.content.decode()
        assert "W-501" in html
        assert 'name="safety_buffer"' not in html
        assert operator_client.post(url, {"safety_buffer": "9"}).status_code == 403
        assert operator_client.get(reverse("admin:catalog_product_changelist")).status_code == 200
        product.refresh_from_db()
        assert (product.safety_buffer, product.reserved) == (1, 5)


def _product_form(client, url) -> dict:
    """The product page's form as the browser would post it back (the inline's management form
    included)."""
    response = client.get(url)
    assert response.status_code == 200
    form = response.context["adminform"].form
    data = {
        name: ("" if value is None else value)
        for name, value in form.initial.items()
        if name in form.fields
    }
    for formset in response.context["inline_admin_formsets"]:
        management = formset.formset.management_form
        for name, field in management.fields.items():
            data[f"{management.prefix}-{name}"] = management.initial.get(name, field.initial)
    return {key: value for key, value in data.items() if value is not None}
