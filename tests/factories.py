from decimal import Decimal

import factory
from django.conf import settings
from factory.django import DjangoModelFactory

from catalog.models import (
    IdempotencyRecord,
    KeptItem,
    PendingProduct,
    Product,
    ProductHistory,
    SyncAudit,
)


class ProductFactory(DjangoModelFactory):
    class Meta:
        model = Product
        skip_postgeneration_save = True

    stock_code = factory.Sequence(lambda n: f"SC-{n:06d}")
    ean = factory.Sequence(lambda n: f"859{n:010d}")
    status = "active"
    shop_quantity = 10
    catalog_price = Decimal("100.00")
    eshop_price = Decimal("90.00")
    name = factory.LazyAttribute(lambda o: f"Tyre {o.stock_code}")
    brand = "Nordway"

    @factory.post_generation
    def level(product, create, extracted, **kwargs):
        """The product's stock as the stock app holds it: its level in the default warehouse."""
        if not create:
            return
        from stock.models import StockLevel
        from stock.warehouses import default_warehouse_id

        StockLevel.objects.create(
            product=product,
            warehouse_id=default_warehouse_id(),
            quantity=product.shop_quantity,
            reserved=product.reserved,
            posted_at=product.posted_at,
        )


class PendingProductFactory(DjangoModelFactory):
    class Meta:
        model = PendingProduct

    stock_code = factory.Sequence(lambda n: f"PX-{n:06d}")
    ean = ""
    reason = PendingProduct.Reason.UNKNOWN
    payload = factory.LazyAttribute(
        lambda o: {
            "stock_code": o.stock_code,
            "status": "active",
            "shop_quantity": 3,
            "catalog_price": "10.00",
            "eshop_price": "9.00",
        }
    )
    posted_at = None
    # The payload is the default warehouse's item, as a key sent without warehouses keeps it.
    warehouse_items = factory.LazyAttribute(
        lambda o: {
            settings.DEFAULT_WAREHOUSE: KeptItem(
                settings.DEFAULT_WAREHOUSE, o.payload, posted_at=o.posted_at
            ).stored()
        }
    )


class SyncAuditFactory(DjangoModelFactory):
    class Meta:
        model = SyncAudit

    api_key_name = "erp"
    endpoint = SyncAudit.Endpoint.BATCH
    request_id = factory.Sequence(lambda n: f"DOC-{n:06d}")
    source_type = "stock_receipt"
    products_received = 1
    products_updated = 1
    outcome = SyncAudit.Outcome.APPLIED
    status_code = 200


class ProductHistoryFactory(DjangoModelFactory):
    class Meta:
        model = ProductHistory

    product = factory.SubFactory(ProductFactory)
    audit = factory.SubFactory(SyncAuditFactory)
    field = ProductHistory.Field.SHOP_QUANTITY
    old_value = "10"
    new_value = "7"


class IdempotencyRecordFactory(DjangoModelFactory):
    class Meta:
        model = IdempotencyRecord

    api_key_id = "erp-key"
    endpoint = SyncAudit.Endpoint.BATCH
    request_id = factory.Sequence(lambda n: f"DOC-{n:06d}")
    body_hash = factory.Sequence(lambda n: f"{n:064x}")
    response = {"success": True}


def full_item(index: int, **overrides) -> dict:
    """A fully populated product item as the partner system sends it."""
    item = {
        "stock_code": f"SC-{index:06d}",
        "ean": f"859{index:010d}",
        "status": "active",
        "shop_quantity": index % 50,
        "catalog_price": 120.5,
        "eshop_price": 99.9,
        "name": f"Winter Grip Performance 205/55 R16 91H XL item {index}",
        "section_width_mm": "205",
        "aspect_ratio": "55",
        "rim_inch": "R16",
        "tread_name": "Winter Grip Performance",
        "name_suffix": "2026 edition, studless, extra load",
        "load_index": "91",
        "speed_index": "H",
        "special_marking": "XL FR M+S 3PMSF",
        "run_on_flat": False,
        "brand": "Nordway",
        "usage": "passenger",
        "season": "winter",
        "on_promotion": True,
        "on_clearance": False,
        "dot_code": "DOT 2426",
        "weight_kg": 9.45,
        "discontinued": False,
        "eu_label": "C/B/71dB/A",
    }
    item.update(overrides)
    return item


def levels_like_products(products) -> None:
    """Give products made without the factory (bulk_create) their level in the default
    warehouse, holding their figures, as the stock app would have written it."""
    from stock.models import StockLevel
    from stock.warehouses import default_warehouse_id

    warehouse_id = default_warehouse_id()
    StockLevel.objects.bulk_create(
        [
            StockLevel(
                product_id=product.pk,
                warehouse_id=warehouse_id,
                quantity=product.shop_quantity,
                reserved=product.reserved,
                posted_at=product.posted_at,
            )
            for product in products
        ]
    )


def stock_set_directly(products, quantity: int) -> None:
    """Put the products' stock at `quantity` behind every service's back (what a test needs
    to tell whether a call writes it): the product's figure and its default level alike."""
    from stock.models import StockLevel

    ids = list(products.values_list("pk", flat=True))
    products.model.objects.filter(pk__in=ids).update(shop_quantity=quantity)
    StockLevel.objects.filter(product_id__in=ids).update(quantity=quantity)


def set_level(product, warehouse, quantity: int, *, posted_at=None) -> None:
    """Give the product `quantity` in the warehouse through the stock app (a staff edit), so
    that its figures stay the sums of its levels; `posted_at` becomes the level's document
    time."""
    from django.utils import timezone

    from stock.levels import levels_set
    from stock.models import StockMovement
    from stock.movements import Source

    levels_set(
        {product.pk: quantity},
        source=Source(StockMovement.Reason.STAFF_EDIT, staff_user="test"),
        now=timezone.now(),
        posted_at=posted_at,
        warehouse_id=warehouse.pk,
    )
    product.refresh_from_db()
