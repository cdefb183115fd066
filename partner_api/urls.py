"""Paths answer exactly as written and with a trailing slash, never with a redirect."""

from django.urls import re_path

from partner_api import orders, plants, products, shop, snapshots

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
    re_path(
        r"^v1/partner/orders/(?P<order_id>[^/]+)/status/?$",
        orders.OrderStatusView.as_view(),
        name="orders-status",
    ),
    re_path(
        r"^v1/partner/orders/(?P<order_id>[^/]+)/shipments/?$",
        orders.OrderShipmentView.as_view(),
        name="orders-shipments",
    ),
    re_path(
        r"^v1/partner/stock/snapshots/?$",
        snapshots.SnapshotOpenView.as_view(),
        name="stock-snapshots",
    ),
    re_path(
        r"^v1/partner/stock/snapshots/(?P<snapshot_id>[^/]+)/?$",
        snapshots.SnapshotDetailView.as_view(),
        name="stock-snapshot",
    ),
    re_path(
        r"^v1/partner/stock/snapshots/(?P<snapshot_id>[^/]+)/items/?$",
        snapshots.SnapshotItemsView.as_view(),
        name="stock-snapshot-items",
    ),
    re_path(
        r"^v1/partner/stock/snapshots/(?P<snapshot_id>[^/]+)/commit/?$",
        snapshots.SnapshotCommitView.as_view(),
        name="stock-snapshot-commit",
    ),
    re_path(
        r"^v1/partner/stock/snapshots/(?P<snapshot_id>[^/]+)/absent/?$",
        snapshots.SnapshotAbsentView.as_view(),
        name="stock-snapshot-absent",
    ),
    re_path(r"^v1/shop/stock/query/?$", shop.StockQueryView.as_view(), name="shop-stock-query"),
    re_path(r"^v1/shop/orders/?$", shop.ShopOrderListView.as_view(), name="shop-orders"),
    re_path(
        r"^v1/shop/orders/(?P<order_id>[^/]+)/?$", shop.ShopOrderView.as_view(), name="shop-order"
    ),
    re_path(
        r"^v1/shop/orders/(?P<order_id>[^/]+)/cancel/?$",
        shop.ShopOrderCancelView.as_view(),
        name="shop-order-cancel",
    ),
    re_path(r"^v3/plant/?$", plants.PlantView.as_view(), name="plant"),
]
