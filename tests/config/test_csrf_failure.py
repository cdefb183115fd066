"""The CSRF refusal (403) of a form post is JSON outside the admin, like every error body of
the service; the admin keeps Django's page (decisions.md, "Error bodies")."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/healthz", "/healthz/", "/metrics", "/"])
def test_a_form_post_without_a_csrf_token_is_a_json_403(path):
    client = Client(enforce_csrf_checks=True)
    response = client.post(path, {"a": "1"})
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    assert "CSRF" in response.json()["detail"]
    assert response["X-Request-ID"]


def test_the_admin_keeps_django_s_csrf_page():
    client = Client(enforce_csrf_checks=True)
    response = client.post("/admin/login/", {"username": "a", "password": "b"})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
