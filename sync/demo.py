"""Demo catalogue for `manage.py demo`."""

from catalog.models import Product
from catalog.schemas import ProductItem
from sync.imports import products_import

DEMO_PRODUCTS = [
    {
        "stock_code": "PT-205-55-16-W",
        "ean": "8591234567001",
        "name": "Winter Grip 205/55 R16",
        "status": "active",
        "shop_quantity": 12,
        "catalog_price": 89.90,
        "eshop_price": 84.50,
        "brand": "Nordway",
        "season": "winter",
        "section_width_mm": "205",
        "aspect_ratio": "55",
        "rim_inch": "R16",
        "load_index": "91",
        "speed_index": "H",
        "weight_kg": "8,9",
    },
    {
        "stock_code": "PT-225-45-17-S",
        "ean": "8591234567002",
        "name": "Summer Sport 225/45 R17",
        "status": "active",
        "shop_quantity": 4,
        "catalog_price": 119.00,
        "eshop_price": 109.00,
        "brand": "Velox",
        "season": "summer",
        "on_promotion": True,
    },
    {
        "stock_code": "PT-195-65-15-A",
        "name": "All Season 195/65 R15",
        "status": "active",
        "shop_quantity": 0,
        "catalog_price": 64.00,
        "eshop_price": 61.00,
        "brand": "Nordway",
        "season": "all-season",
    },
]


BUFFERED_STOCK_CODE = "PT-225-45-17-S"


def seed() -> list[str]:
    """Create the demo products once; returns lines to show the user."""
    if Product.objects.exists():
        return []
    result = products_import(items=[ProductItem.model_validate(p) for p in DEMO_PRODUCTS])
    # A buffer staff set on one product (the others take STOCK_SAFETY_BUFFER).
    Product.objects.filter(stock_code=BUFFERED_STOCK_CODE).update(safety_buffer=1)
    return [f"Demo catalogue: {result.created} products."]
