from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.files import FileInvalid, read_valid_records
from plants.schemas import PlantRecord
from plants.services import PlantsRefused, plants_import


class Command(BaseCommand):
    help = (
        "Create or update plants from a JSON file: a list of objects with the plant operation's "
        "fields (name, category, tags, status) and an optional id. A plant with an id is updated "
        "(or created with that id); one without is created. All or nothing. Prints `<id> <name>` "
        "per plant."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="Path of the .json file.")

    def handle(self, *args, file: Path, **options):
        try:
            records = read_valid_records(file, PlantRecord, noun="item")
            plants = plants_import(records=[record for _, record in records])
        except FileInvalid as exc:
            raise CommandError(str(exc)) from exc
        except PlantsRefused as exc:
            raise CommandError(exc.report("item")) from exc
        for plant in plants:
            self.stdout.write(f"{plant.pk} {plant.name}")
