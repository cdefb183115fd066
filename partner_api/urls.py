"""Paths answer exactly as written and with a trailing slash, never with a redirect."""

from django.urls import re_path

from partner_api import orders, plants, products

app_name = "partner_api"

urlpatterns = [
    re_path(
        r"^v1/partner/products/sync/?$", products.ProductSyncView.as_view(), name="products-sync"
    ),
    re_path(
        r"^v1/partner/products/item/?$", products.ProductItemView.as_view(), name="products-item"
    ),
    re_path(r"^v1/partner/orders/?$", orders.OrderPollView.as_view(), name="orders-poll"),
    re_path(
        r"^v1/partner/orders/(?P<order_id>[^/]+)/acknowledge/?$",
        orders.OrderAcknowledgeView.as_view(),
        name="orders-acknowledge",
    ),
    re_path(r"^v3/plant/?$", plants.PlantView.as_view(), name="plant"),
]
