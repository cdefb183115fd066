"""Demo warehouses for `manage.py demo`: the central store (the default warehouse, made by
`migrate`) and two branches, one with a lead time."""

from stock.models import Warehouse
from stock.warehouses import warehouse_save

DEMO_WAREHOUSES = [
    {"code": "EAST", "name": "Branch East", "priority": 200, "lead_time_days": 0},
    {"code": "WEST", "name": "Branch West", "priority": 300, "lead_time_days": 2},
]


def seed() -> list[str]:
    """Create the demo branches once; returns lines to show the user."""
    if Warehouse.objects.filter(code__in=[w["code"] for w in DEMO_WAREHOUSES]).exists():
        return []
    for warehouse in DEMO_WAREHOUSES:
        fields = dict(warehouse)
        warehouse_save(fields.pop("code"), **fields)
    return [f"Demo warehouses: {', '.join(w['code'] for w in DEMO_WAREHOUSES)} beside the default."]
