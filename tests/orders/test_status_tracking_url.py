"""The status operation's tracking fields are handed to every storefront as they are stored
(decisions.md, "What became of an order (partner)"): `tracking_url` is an absolute http or
https URL made only of the characters RFC 3986 allows; `carrier` and `tracking_number` hold no
control or format character."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from orders.models import Order
from tests.orders.test_status import placed, report  # noqa: F401 - the fixture
from tests.shop.helpers import order_url

pytestmark = pytest.mark.django_db


def refused(response, order_id, field, kind) -> None:
    assert response.status_code == 422, response.json()
    assert [(p["loc"], p["type"]) for p in response.json()["detail"]] == [(["body", field], kind)]
    order = Order.objects.get(pk=order_id)
    assert (order.status, order.carrier, order.tracking_number, order.tracking_url) == (
        "new",
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    "url",
    [
        'https://example.com/"><script>alert(1)</script>',
        "https://example.com/<b>",
        "https://example.com/a b",
        "https://example.com/a\\b",
        "https://example.com/{x}",
        "https://example.com/a|b",
        "https://example.com/a^b",
        "https://example.com/`x`",
        "https://example.com/%zz",
        "https://example.com/%4",
        "https://příklad.cz/zásilka",
        "\f",
        "https://example.com/\f",
        "https://example.com/\n",
        "\thttps://example.com/",
        "https://example.com/\u200b",
        "https://example.com/\u202e",
    ],
)
def test_a_character_rfc_3986_does_not_allow_is_422(api_client, placed, url):  # noqa: F811
    order_id, _ = placed()
    response = report(api_client, order_id, "shipped", tracking_url=url)
    refused(response, order_id, "tracking_url", "url_parsing")


def test_a_nul_is_422(api_client, placed):  # noqa: F811
    order_id, _ = placed()
    response = report(api_client, order_id, "shipped", tracking_url="https://example.com/\x00")
    assert response.status_code == 422
    assert [p["loc"] for p in response.json()["detail"]] == [["body", "tracking_url"]]


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/track?id=PPL-1&lang=cs#top",
        "https://example.com/p%C5%99%C3%ADklad/a%20b",
        "http://user@[2001:db8::1]:8080/x;y=1",
        "https://example.com/~a_b-c.d!$'()*+,=:@/",
    ],
)
def test_every_character_rfc_3986_allows_is_taken_as_sent(
    api_client,
    shop_client,
    placed,  # noqa: F811
    url,
):
    order_id, _ = placed()
    response = report(api_client, order_id, "shipped", tracking_url=url)
    assert response.status_code == 200, response.json()
    assert response.json()["tracking_url"] == url
    assert shop_client.get(order_url(order_id)).json()["tracking_url"] == url


def test_surrounding_spaces_are_stripped_and_blank_is_none(api_client, placed):  # noqa: F811
    order_id, _ = placed()
    response = report(api_client, order_id, "shipped", tracking_url="  https://t.example/1  ")
    assert response.json()["tracking_url"] == "https://t.example/1"
    response = report(api_client, order_id, "shipped", tracking_url="   ")
    assert response.status_code == 200
    assert response.json()["tracking_url"] is None


@pytest.mark.parametrize(
    "char", ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u200b", "\ufeff", "\u202e", "\u2066"]
)
@pytest.mark.parametrize("field", ["carrier", "tracking_number"])
def test_carrier_and_tracking_number_refuse_control_and_format_characters(
    api_client,
    placed,  # noqa: F811
    field,
    char,
):
    order_id, _ = placed()
    response = report(api_client, order_id, "shipped", **{field: f"PPL{char}123"})
    refused(response, order_id, field, "invalid_characters")


@pytest.mark.parametrize("field", ["carrier", "tracking_number"])
def test_carrier_and_tracking_number_of_every_script_are_taken(api_client, placed, field):  # noqa: F811
    order_id, _ = placed()
    response = report(api_client, order_id, "shipped", **{field: " Zásilkovna 輸送 "})
    assert response.status_code == 200, response.json()
    assert response.json()[field] == "Zásilkovna 輸送"


def test_the_schema_s_pattern_says_the_same():
    response = Client().get(reverse("schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schema = response.json()
    field = schema["components"]["schemas"]["StatusRequest"]["properties"]["tracking_url"]
    pattern = re.compile(field["pattern"])
    for url in ("https://example.com/a%20b?x=1#y", "", "  ", "HTTP://X.CZ"):
        assert pattern.search(url), url
    for url in ('https://example.com/"><script>', "\f", "https://a b", "ftp://x", "https://"):
        assert not pattern.search(url), url
