"""Demo data of the plants app for `manage.py demo`."""

from plants.models import Plant
from plants.schemas import PlantRecord
from plants.services import plants_import

DEMO_PLANTS = [
    {
        "name": "Monstera deliciosa",
        "category": "houseplant",
        "status": "available",
        "tags": ["indoor", "large-leaf", "easy-care"],
    },
    {
        "name": "Ficus lyrata",
        "category": "houseplant",
        "status": "pending",
        "tags": ["indoor", "bright-light"],
    },
    {
        "name": "Lavandula angustifolia",
        "category": "herb",
        "status": "available",
        "tags": ["outdoor", "fragrant", "drought-tolerant"],
    },
    {
        "name": "Olea europaea",
        "category": "tree",
        "status": "sold",
        "tags": ["outdoor", "mediterranean"],
    },
]


def seed() -> list[str]:
    """Create the demo plants once; returns lines to show the user."""
    if Plant.objects.exists():
        return []
    plants = plants_import(records=[PlantRecord.model_validate(p) for p in DEMO_PLANTS])
    return [f"Demo plants: {len(plants)} (ids {plants[0].pk} to {plants[-1].pk})."]
