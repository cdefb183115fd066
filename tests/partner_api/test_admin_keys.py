"""API keys in the admin: each key's scope in the list, chosen when a key is made."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from partner_api.keys import api_key_create
from partner_api.models import ApiKeyScope, key_scope

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:rest_framework_api_key_apikey_changelist")
ADD = reverse("admin:rest_framework_api_key_apikey_add")
STOCK_QUERY = "/api/v1/shop/stock/query"
ORDERS_FEED = "/api/v1/partner/orders"


@pytest.fixture
def boss_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))
    return client


@pytest.fixture
def operator_client() -> Client:
    user = User.objects.create_user("olga", "olga@example.com", "x", is_staff=True)
    user.groups.add(Group.objects.get(name="sync operators"))
    client = Client()
    client.force_login(user)
    return client


def _listed(response) -> dict[str, str]:
    return {key.name: key_scope(key) for key in response.context["cl"].result_list}


def _key_from_message(response) -> str:
    messages = [str(message) for message in response.context["messages"]]
    found = [re.search(r"The API key for .* is: (\S+)\. ", text) for text in messages]
    values = [match.group(1) for match in found if match]
    assert len(values) == 1, messages
    return values[0]


def _works_on(key: str, path: str, body=None) -> int:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    if body is None:
        return client.get(path).status_code
    return client.post(path, body, format="json").status_code


def test_the_list_shows_each_key_s_scope_and_filters_by_it(boss_client):
    api_key_create(name="erp")
    api_key_create(name="storefront", scope="shop")
    legacy, _ = APIKey.objects.create_key(name="before-scopes")  # no scope row: a partner key
    ApiKeyScope.objects.filter(api_key=legacy).delete()

    response = boss_client.get(CHANGELIST)

    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(r'<td class="field-scope_display">Shop</td>', html)
    assert len(re.findall(r'<td class="field-scope_display">Partner system</td>', html)) == 2
    assert _listed(response) == {"erp": "partner", "storefront": "shop", "before-scopes": "partner"}
    assert _listed(boss_client.get(CHANGELIST, {"scope": "shop"})) == {"storefront": "shop"}
    assert set(_listed(boss_client.get(CHANGELIST, {"scope": "partner"}))) == {
        "erp",
        "before-scopes",
    }


def test_the_add_form_offers_the_scope_with_partner_as_default(boss_client):
    response = boss_client.get(ADD)

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.fields["scope"].initial == "partner"
    assert [value for value, _ in form.fields["scope"].choices] == ["partner", "shop"]


@pytest.mark.parametrize(
    ("scope", "allowed", "refused"),
    [
        ("shop", (STOCK_QUERY, {"keys": [{"stock_code": "X"}]}), (ORDERS_FEED, None)),
        ("partner", (ORDERS_FEED, None), (STOCK_QUERY, {"keys": [{"stock_code": "X"}]})),
    ],
)
def test_a_key_made_in_the_admin_has_the_scope_chosen(boss_client, scope, allowed, refused):
    response = boss_client.post(ADD, {"name": f"made-{scope}", "scope": scope}, follow=True)

    assert response.status_code == 200
    key = _key_from_message(response)
    made = APIKey.objects.get(name=f"made-{scope}")
    assert key_scope(made) == scope
    assert _works_on(key, *allowed) == 200
    assert _works_on(key, *refused) == 403


def test_a_key_made_without_a_scope_in_the_form_is_refused_not_guessed(boss_client):
    response = boss_client.post(ADD, {"name": "odd", "scope": "admin"})

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["scope"]
    assert not APIKey.objects.filter(name="odd").exists()


def test_a_made_key_shows_its_scope_and_keeps_it(boss_client):
    api_key, _ = api_key_create(name="storefront", scope="shop")
    url = reverse("admin:rest_framework_api_key_apikey_change", args=(api_key.pk,))

    page = boss_client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="scope"' not in html
    assert re.search(r"Scope:</label>\s*<div class=\"readonly\">Shop</div>", html)

    saved = boss_client.post(url, {"name": "storefront-2", "scope": "partner"})
    assert saved.status_code == 302
    api_key.refresh_from_db()
    assert (api_key.name, key_scope(api_key)) == ("storefront-2", "shop")


def test_an_operator_sees_the_keys_and_their_scope_but_makes_none(operator_client):
    api_key_create(name="storefront", scope="shop")

    response = operator_client.get(CHANGELIST)

    assert response.status_code == 200
    assert _listed(response) == {"storefront": "shop"}
    assert operator_client.get(ADD).status_code == 403
    assert operator_client.post(ADD, {"name": "sneaky", "scope": "shop"}).status_code == 403
    assert not APIKey.objects.filter(name="sneaky").exists()
