"""Demo data of the plants app for `manage.py demo`."""

from plants.models import Plant
from plants.schemas import PlantRecord
from plants.services import plants_import

DEMO_PLANTS = [
    {"name": name, "category": category, "status": status, "tags": tags}
    for name, category, status, tags in [
        ("Monstera deliciosa", "houseplant", "available", ["indoor", "large-leaf", "easy-care"]),
        ("Ficus lyrata", "houseplant", "pending", ["indoor", "bright-light"]),
        (
            "Lavandula angustifolia",
            "herb",
            "available",
            ["outdoor", "fragrant", "drought-tolerant"],
        ),
        ("Olea europaea", "tree", "sold", ["outdoor", "mediterranean"]),
    ]
]


def seed() -> list[str]:
    """Create the demo plants once; returns lines to show the user."""
    if Plant.objects.exists():
        return []
    plants = plants_import(records=[PlantRecord.model_validate(p) for p in DEMO_PLANTS])
    return [f"Demo plants: {len(plants)} (ids {plants[0].pk} to {plants[-1].pk})."]
