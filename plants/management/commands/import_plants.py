import json
from pathlib import Path

import pydantic
from django.core.management.base import BaseCommand, CommandError

from plants.schemas import PlantRecord
from plants.services import PlantsRefused, plants_import


def _where(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "record"


def read_plant_records(path: Path) -> list[PlantRecord]:
    """The file's plants, validated; every problem of every record is named in the error."""
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"{path}: cannot be read: {exc}") from exc
    if not isinstance(data, list):
        raise CommandError(f"{path}: the file must hold a JSON list of plants.")
    records: list[PlantRecord] = []
    problems: list[str] = []
    for index, entry in enumerate(data):
        try:
            records.append(PlantRecord.model_validate(entry))
        except pydantic.ValidationError as exc:
            problems.extend(
                f"item {index}: {_where(err['loc'])}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
    if problems:
        raise CommandError("Nothing was imported. Problems:\n" + "\n".join(problems))
    return records


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
        records = read_plant_records(file)
        try:
            plants = plants_import(records=records)
        except PlantsRefused as exc:
            lines = [f"item {index}: {msg}" for index, msg in exc.problems]
            raise CommandError("Nothing was imported. Problems:\n" + "\n".join(lines)) from exc
        for plant in plants:
            self.stdout.write(f"{plant.pk} {plant.name}")
