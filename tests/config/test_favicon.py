"""The browser's favicon: answered at /favicon.ico and linked from every admin page."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.urls import reverse

ICO_HEADER = b"\x00\x00\x01\x00"


def test_favicon_ico_is_the_static_icon(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    with open(finders.find("favicon.ico"), "rb") as file:
        assert response.content == file.read()
    assert response.content.startswith(ICO_HEADER)
    assert "max-age" in response["Cache-Control"]
    assert client.head("/favicon.ico").status_code == 200


def test_favicon_ico_takes_no_writes(client):
    assert client.post("/favicon.ico").status_code == 405


@pytest.mark.django_db
def test_admin_pages_link_the_favicon(client, admin_client):
    for sender, url in ((client, reverse("admin:login")), (admin_client, reverse("admin:index"))):
        response = sender.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        links = re.findall(r'<link rel="icon" href="([^"]+)"', page)
        assert links == [static("favicon.ico")], url


def test_the_landing_page_links_the_favicon(client):
    page = client.get(reverse("landing")).content.decode()
    assert '<link rel="icon" href="/favicon.ico"' in page
