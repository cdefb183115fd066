from pathlib import Path

from core.files import read_valid_records
from core.management.imports import FileImportCommand
from plants.schemas import PlantRecord
from plants.services import PlantsRefused, plants_import


class Command(FileImportCommand):
    help = (
        "Create or update plants from a JSON file: a list of objects with the plant operation's "
        "fields (name, category, tags, status) and an optional id. A plant with an id is updated "
        "(or created with that id); one without is created. All or nothing. Prints `<id> <name>` "
        "per plant."
    )

    refused = PlantsRefused

    def import_file(self, file: Path) -> list[str]:
        records = read_valid_records(file, PlantRecord, noun="item")
        plants = plants_import(records=[record for _, record in records])
        return [f"{plant.pk} {plant.name}" for plant in plants]
