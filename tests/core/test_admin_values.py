"""How the back-office shows values: decimals trimmed, proper labels, amounts never edited."""

from decimal import Decimal

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from catalog.models import Product
from core.display import DecimalInput
from orders.models import Order
from tests.factories import ProductFactory
from tests.orders.factories import OrderItemFactory, order_with_items

PROJECT_APPS = ("catalog", "stock", "sync", "orders", "plants")
# Name parts that are abbreviations or units: the generated label ("Eshop price", "Dot code",
# "Api key name", "Duration ms") is wrong for them.
ABBREVIATIONS = {
    "api", "dic", "dot", "ean", "eshop", "eu", "http", "ico", "id", "inch", "kg", "mm", "ms",
    "ref", "sku", "url", "vat",
}  # fmt: skip


def _admin_models():
    models = set()
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label in PROJECT_APPS:
            models.add(model)
            models.update(inline.model for inline in model_admin.inlines)
    return sorted(models, key=lambda m: m._meta.label)


def test_every_admin_field_has_a_proper_label():
    raw = []
    for model in _admin_models():
        for field in model._meta.concrete_fields:
            parts = field.name.split("_")
            generated = field.name.replace("_", " ")
            if ABBREVIATIONS.intersection(parts) and field.verbose_name == generated:
                raw.append(f"{model._meta.label}.{field.name}: {field.verbose_name!r}")
    assert not raw, raw


@pytest.mark.parametrize(
    ("model", "name", "label"),
    [
        ("catalog.Product", "eshop_price", "e-shop price"),
        ("catalog.Product", "dot_code", "DOT code"),
        ("catalog.Product", "eu_label", "EU label"),
        ("catalog.Product", "weight_kg", "weight (kg)"),
        ("catalog.SyncAudit", "api_key_name", "API key name"),
        ("orders.Order", "vat_total", "VAT total"),
    ],
)
def test_labels(model, name, label):
    assert apps.get_model(model)._meta.get_field(name).verbose_name == label


@pytest.mark.parametrize(
    ("value", "places", "shown"),
    [
        (Decimal("89.9000"), 2, "89.90"),
        (Decimal("89.1234"), 2, "89.1234"),
        (Decimal("9.5000"), 0, "9.5"),
        (Decimal("10.0000"), 0, "10"),
        (Decimal("0.0000"), 0, "0"),
        ("89.9000", 2, "89.9000"),  # what the user typed is shown as typed
        (None, 2, None),
    ],
)
def test_decimal_input_shows_stored_values_trimmed(value, places, shown):
    assert DecimalInput(min_places=places).format_value(value) == shown


@pytest.mark.django_db
def test_product_page_shows_prices_and_weight_trimmed_under_proper_labels(admin_client):
    product = ProductFactory(
        catalog_price=Decimal("89.9"), eshop_price=Decimal("84.125"), weight_kg=Decimal("9.5")
    )
    page = admin_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))
    html = page.content.decode()
    assert page.status_code == 200
    assert "89.9000" not in html and "84.1250" not in html and "9.5000" not in html
    assert ">89.90<" in html  # read-only catalogue price
    assert ">84.125<" in html  # a third significant decimal stays
    assert 'value="9.5"' in html  # the weight's form field
    for label in ("E-shop price", "DOT code", "EU label", "Weight (kg)"):
        assert f">{label}" in html, label
    for raw in ("Eshop price", "Dot code", "Eu label", "Weight kg"):
        assert raw not in html, raw


@pytest.mark.django_db
def test_product_list_shows_the_e_shop_price_trimmed(admin_client):
    ProductFactory(eshop_price=Decimal("84.5"))
    html = admin_client.get(reverse("admin:catalog_product_changelist")).content.decode()
    assert "84.50" in html and "84.5000" not in html
    assert "E-shop price" in html


@pytest.mark.django_db
def test_new_product_form_shows_price_fields_without_noise(admin_client):
    html = admin_client.get(reverse("admin:catalog_product_add")).content.decode()
    assert 'name="eshop_price"' in html and "E-shop price" in html


@pytest.mark.django_db
def test_order_page_shows_amounts_trimmed_and_read_only(admin_client):
    order = order_with_items(1, subtotal=Decimal("1116"), vat_total=Decimal("234.36"))
    item = order.items.get()
    item.unit_price, item.total = Decimal("109"), Decimal("872")
    item.save()
    html = admin_client.get(reverse("admin:orders_order_change", args=(order.pk,))).content.decode()
    assert ">1116.00<" in html and ">234.36<" in html and ">109.00<" in html
    assert "1116.0000" not in html and "109.0000" not in html
    for name in ("subtotal", "vat_total", "total", "currency"):
        assert f'name="{name}"' not in html, name
    assert 'name="items-0-unit_price"' not in html
    assert 'name="items-0-total"' not in html
    assert 'name="items-0-quantity"' not in html


@pytest.mark.django_db
def test_posting_other_amounts_changes_nothing(admin_client):
    order = order_with_items(1, subtotal=Decimal("100"), vat_total=Decimal("21"))
    item = order.items.get()
    before = (order.subtotal, order.vat_total, order.total, item.unit_price, item.total)
    url = reverse("admin:orders_order_change", args=(order.pk,))
    form = {
        "order_number": order.order_number,
        "created_at_0": order.created_at.strftime("%Y-%m-%d"),
        "created_at_1": order.created_at.strftime("%H:%M:%S"),
        "status": order.status,
        "customer_name": order.customer_name,
        "customer_email": order.customer_email,
        "subtotal": "1",
        "vat_total": "1",
        "total": "1",
        "currency": "USD",
        "items-TOTAL_FORMS": "1",
        "items-INITIAL_FORMS": "1",
        "items-MIN_NUM_FORMS": "0",
        "items-MAX_NUM_FORMS": "1000",
        "items-0-id": str(item.pk),
        "items-0-order": str(order.pk),
        "items-0-unit_price": "1",
        "items-0-total": "1",
        "items-0-quantity": "99",
    }
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    order.refresh_from_db()
    item.refresh_from_db()
    assert (order.subtotal, order.vat_total, order.total, item.unit_price, item.total) == before
    assert order.currency == "EUR" and item.quantity != 99


@pytest.mark.django_db
def test_an_order_has_no_way_to_add_items_in_the_admin(admin_client):
    order = OrderItemFactory().order
    html = admin_client.get(reverse("admin:orders_order_change", args=(order.pk,))).content.decode()
    assert 'name="items-__prefix__-name"' not in html
    assert Order.objects.count() == 1 and Product.objects.count() == 0
