"""The products' figures as sums of their levels: `Product.shop_quantity` and
`Product.reserved` are the sums of the product's levels in the warehouses that sell, written
again by every writer of levels, reserved units or a warehouse's `sells`, in the same
transaction as the change."""

from __future__ import annotations

from datetime import datetime

from django.db.models import IntegerField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from catalog.models import Product
from stock.models import StockLevel


def products_resum(
    product_ids: set[int] | QuerySet,
    *,
    quantity: bool = True,
    reserved: bool = True,
    now: datetime | None = None,
):
    """Rewrite the products' `shop_quantity` and/or `reserved` as the sums of their levels in
    the warehouses that sell (and `updated_at` when `now` is given); `product_ids`: the ids,
    or a query that gives them."""
    if not (quantity or reserved):
        return
    if not isinstance(product_ids, QuerySet):
        if not product_ids:
            return
        product_ids = list(product_ids)

    def summed(column: str):
        levels = (
            StockLevel.objects.filter(product=OuterRef("pk"), warehouse__sells=True)
            .order_by()
            .values("product")
            .annotate(total=Sum(column))
            .values("total")
        )
        return Coalesce(Subquery(levels, output_field=IntegerField()), Value(0))

    figures = {}
    if quantity:
        figures["shop_quantity"] = summed("quantity")
    if reserved:
        figures["reserved"] = summed("reserved")
    if now is not None:
        figures["updated_at"] = Value(now)
    Product.objects.filter(pk__in=product_ids).update(**figures)
