import json
import logging

import pytest
from django.urls import reverse

from orders.models import Order
from tests.orders.factories import OrderFactory, order_with_items

pytestmark = pytest.mark.django_db


def url(order_id) -> str:
    return reverse("partner_api:orders-acknowledge", kwargs={"order_id": order_id})


def acknowledge(client, order_id, body=None, **kwargs):
    if body is None:
        body = {"partner_reference": "FA-2026-001"}
    return client.post(url(order_id), body, format="json", **kwargs)


class TestAuthentication:
    def test_no_key_is_401(self, anon_client):
        order = OrderFactory()
        response = acknowledge(anon_client, order.pk)
        assert response.status_code == 401
        assert "WWW-Authenticate" in response
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER

    def test_bad_key_with_bad_body_and_bad_id_is_401(self, anon_client):
        anon_client.credentials(HTTP_X_API_KEY="wrong")
        response = anon_client.post(url("abc"), "{", content_type="application/json")
        assert response.status_code == 401
        assert set(response.json()) == {"detail"}


class TestFirstAcknowledgement:
    def test_stores_reference_and_time_and_returns_the_order(self, api_client):
        order = order_with_items(2)
        response = acknowledge(api_client, order.pk, {"partner_reference": "  FA-1  "})
        assert response.status_code == 200
        body = response.json()
        assert body["order_id"] == order.pk
        assert body["order_number"] == order.order_number
        assert body["partner_sync_status"] == "acknowledged"
        assert body["partner_reference"] == "FA-1"
        assert len(body["items"]) == 2
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED
        assert order.partner_reference == "FA-1"
        assert order.acknowledged_at is not None

    def test_order_leaves_the_default_poll(self, api_client):
        order = OrderFactory()
        acknowledge(api_client, order.pk)
        poll = api_client.get(reverse("partner_api:orders-poll")).json()
        assert poll == {"orders": [], "count": 0, "next_cursor": None}
        poll = api_client.get(
            reverse("partner_api:orders-poll"), {"partner_status": "acknowledged"}
        )
        assert [o["order_id"] for o in poll.json()["orders"]] == [order.pk]

    def test_trailing_slash_answers_the_same(self, api_client):
        order = OrderFactory()
        response = api_client.post(
            url(order.pk) + "/", {"partner_reference": "FA-1"}, format="json"
        )
        assert response.status_code == 200
        assert response.json()["partner_reference"] == "FA-1"

    def test_number_reference_is_read_as_text(self, api_client):
        order = OrderFactory()
        response = acknowledge(api_client, order.pk, {"partner_reference": 20260001})
        assert response.status_code == 200
        assert response.json()["partner_reference"] == "20260001"


class TestRepeat:
    def test_same_reference_is_200_and_changes_nothing(self, api_client):
        order = OrderFactory()
        first = acknowledge(api_client, order.pk, {"partner_reference": "FA-1"})
        order.refresh_from_db()
        stored_at = order.acknowledged_at
        again = acknowledge(api_client, order.pk, {"partner_reference": "FA-1", "note": "retry"})
        assert again.status_code == 200
        assert again.json() == first.json()
        assert "Idempotent-Replayed" not in first
        assert again["Idempotent-Replayed"] == "true"
        order.refresh_from_db()
        assert order.acknowledged_at == stored_at
        assert order.partner_reference == "FA-1"

    def test_other_reference_is_409_naming_the_stored_one(self, api_client):
        order = OrderFactory(acknowledged=True, partner_reference="FA-1")
        response = acknowledge(api_client, order.pk, {"partner_reference": "FA-2"})
        assert response.status_code == 409
        assert response.json() == {
            "detail": f"Order {order.pk} is already acknowledged with partner_reference 'FA-1'.",
            "partner_reference": "FA-1",
        }
        order.refresh_from_db()
        assert order.partner_reference == "FA-1"

    def test_reference_comparison_is_exact(self, api_client):
        order = OrderFactory(acknowledged=True, partner_reference="FA-1")
        assert acknowledge(api_client, order.pk, {"partner_reference": "fa-1"}).status_code == 409


class TestNotFound:
    def test_missing_order_is_404(self, api_client):
        response = acknowledge(api_client, 999999)
        assert response.status_code == 404
        assert response.json() == {"detail": "Order 999999 not found."}

    def test_legacy_order_is_404(self, api_client):
        order = OrderFactory(legacy=True)
        response = acknowledge(api_client, order.pk)
        assert response.status_code == 404
        order.refresh_from_db()
        assert order.partner_sync_status is None
        assert order.partner_reference is None


class TestValidation:
    @pytest.mark.parametrize(
        "order_id", ["abc", "1.5", "1e3", "-1", "0", "99999999999999999999", "%20"]
    )
    def test_non_integer_or_impossible_order_id_is_422(self, api_client, order_id):
        # Written out: reverse() would quote "%20" again.
        response = api_client.post(
            f"/api/v1/partner/orders/{order_id}/acknowledge",
            {"partner_reference": "FA-1"},
            format="json",
        )
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert [d["loc"] for d in detail] == [["path", "order_id"]]

    @pytest.mark.parametrize(
        ("body", "loc", "kind"),
        [
            ({}, ["body", "partner_reference"], "missing"),
            ({"partner_reference": None}, ["body", "partner_reference"], "string_type"),
            ({"partner_reference": ""}, ["body", "partner_reference"], "string_too_short"),
            ({"partner_reference": "   "}, ["body", "partner_reference"], "string_too_short"),
            ({"partner_reference": "x" * 65}, ["body", "partner_reference"], "string_too_long"),
            ({"partner_reference": True}, ["body", "partner_reference"], "string_type"),
            ({"partner_reference": ["FA-1"]}, ["body", "partner_reference"], "string_type"),
            (
                {"partner_reference": "FA-1", "note": "n" * 1001},
                ["body", "note"],
                "string_too_long",
            ),
            ({"partner_reference": "FA-1", "note": False}, ["body", "note"], "string_type"),
            ([{"partner_reference": "FA-1"}], ["body"], "model_type"),
            ("FA-1", ["body"], "model_type"),
        ],
    )
    def test_bad_body_is_422(self, api_client, body, loc, kind):
        order = OrderFactory()
        response = acknowledge(api_client, order.pk, body)
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert [(d["loc"], d["type"]) for d in detail] == [(loc, kind)]
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER

    def test_64_characters_and_a_1000_character_note_are_accepted(self, api_client):
        order = OrderFactory()
        body = {"partner_reference": "R" * 64, "note": "n" * 1000}
        assert acknowledge(api_client, order.pk, body).status_code == 200

    @pytest.mark.parametrize("raw", ["{", "", "null", '{"partner_reference": NaN}'])
    def test_malformed_or_missing_body_is_422(self, api_client, raw):
        order = OrderFactory()
        response = api_client.post(url(order.pk), raw, content_type="application/json")
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"][0] == "body"

    def test_no_body_at_all_is_422(self, api_client):
        order = OrderFactory()
        response = api_client.post(url(order.pk))
        assert response.status_code == 422

    def test_bad_id_and_bad_body_are_both_listed(self, api_client):
        response = api_client.post(url("x"), {"note": "n"}, format="json")
        assert response.status_code == 422
        locs = [d["loc"] for d in response.json()["detail"]]
        assert locs == [["path", "order_id"], ["body", "partner_reference"]]

    def test_bad_id_and_malformed_json_are_both_listed(self, api_client):
        response = api_client.post(url("x"), "{", content_type="application/json")
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert [(d["loc"], d["type"]) for d in detail] == [
            (["path", "order_id"], "int_parsing"),
            (["body"], "json_invalid"),
        ]

    def test_body_that_is_not_json_is_415(self, api_client):
        order = OrderFactory()
        response = api_client.post(
            url(order.pk),
            "partner_reference=FA-1",
            content_type="application/x-www-form-urlencoded",
        )
        assert response.status_code == 415
        assert set(response.json()) == {"detail"}


class TestNote:
    def test_is_logged_and_never_stored(self, api_client, caplog):
        order = OrderFactory()
        with caplog.at_level(logging.INFO, logger="orders"):
            response = acknowledge(
                api_client,
                order.pk,
                {"partner_reference": "FA-7", "note": "booked by Eva\nsecond line"},
            )
        assert response.status_code == 200
        assert "note" not in response.json()
        lines = [r.getMessage() for r in caplog.records if r.name == "orders.services"]
        assert any("'booked by Eva\\nsecond line'" in line and "FA-7" in line for line in lines)
        stored = json.dumps(list(Order.objects.filter(pk=order.pk).values()), default=str)
        assert "booked by Eva" not in stored
