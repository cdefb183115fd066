"""A view-only staff user (every view permission, nothing else) sees no admin action and
changes nothing by posting one: every action of every registered model."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.test import Client, RequestFactory
from django.urls import reverse

from tests.factories import PendingProductFactory, ProductFactory, SyncAuditFactory
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def records():
    ProductFactory()
    PendingProductFactory()
    SyncAuditFactory()
    OrderFactory()
    OrderFactory(acknowledged=True)
    OrderFactory(legacy=True)


@pytest.fixture
def viewer() -> Client:
    user = User.objects.create_user("viewer", "viewer@example.com", "x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.force_login(user)
    return client


def _every_action(model_admin) -> list[str]:
    superuser = User.objects.create_superuser(
        f"root-{model_admin.model._meta.model_name}", "root@example.com", "x"
    )
    request = RequestFactory().get("/")
    request.user = superuser
    return list(model_admin.get_actions(request))


def _snapshot():
    return {model: list(model.objects.order_by("pk").values()) for model in admin.site._registry}


def test_no_action_is_offered_or_applied(viewer, records):
    tried = []
    for model, model_admin in admin.site._registry.items():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        page = viewer.get(url)
        assert page.status_code == 200, url
        assert 'name="action"' not in page.content.decode(), f"{url} offers actions"
        pks = [str(pk) for pk in model.objects.values_list("pk", flat=True)]
        for action in _every_action(model_admin):
            before = _snapshot()
            response = viewer.post(url, {"action": action, "_selected_action": pks, "post": "yes"})
            assert response.status_code in (200, 302, 403), (url, action)
            assert _snapshot() == before, f"{action} on {url} changed something"
            tried.append(action)
    # The actions that change data were all tried.
    assert {"hand_to_partner", "clear_acknowledgement", "create_products", "dismiss"} <= set(tried)
