"""Writes of the plant catalogue: the plant operation and the import command call these."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.management.color import no_style
from django.db import connection, transaction

from core.problems import Problem, Refused
from plants.models import TAGS_IN_ORDER, Plant, Tag
from plants.schemas import PlantRecord


class PlantNotFound(Exception):
    """No plant has the id asked for."""

    def __init__(self, plant_id: int):
        super().__init__(f"Plant not found: {plant_id}")
        self.plant_id = plant_id


class PlantsRefused(Refused):
    """The records break a rule; nothing was applied. Each problem's `loc` is its record's index."""


def plant_tags_set(*, plant: Plant, names: Iterable[str]) -> None:
    """Give the plant these tags, in this order; a repeated tag is kept once, at its first place.

    The tags are listed in the order of their link rows, so the links are written anew.
    """
    names = list(dict.fromkeys(names))
    Link = Plant.tags.through
    Link.objects.filter(plant=plant).delete()
    if not names:
        return
    # ON CONFLICT DO NOTHING: two writers adding the same new tag at once both succeed
    # instead of one failing on the unique name.
    Tag.objects.bulk_create([Tag(name=name) for name in sorted(names)], ignore_conflicts=True)
    tags = dict(Tag.objects.filter(name__in=names).values_list("name", "pk"))
    Link.objects.bulk_create([Link(plant=plant, tag_id=tags[name]) for name in names])


def _apply(plant: Plant, changes: dict[str, Any]) -> None:
    tags = changes.pop("tags", None)
    for name, value in changes.items():
        setattr(plant, name, value)
    plant.save()
    if tags is not None:
        plant_tags_set(plant=plant, names=tags)


def plant_update(
    *,
    plant_id: int,
    name: str | None = None,
    category: str | None = None,
    status: str | None = None,
    tags: Sequence[str] | None = None,
) -> Plant:
    """Set the values given (None leaves a field as it is); tags replace the plant's tags."""
    changes = {
        key: value
        for key, value in {
            "name": name,
            "category": category,
            "status": status,
            "tags": tags,
        }.items()
        if value is not None
    }
    with transaction.atomic():
        plant = Plant.objects.select_for_update().filter(pk=plant_id).first()
        if plant is None:
            raise PlantNotFound(plant_id)
        _apply(plant, changes)
    return Plant.objects.prefetch_related(TAGS_IN_ORDER).get(pk=plant.pk)


def plants_import(*, records: Sequence[PlantRecord]) -> list[Plant]:
    """Create or update plants from a file, all or nothing; returns them in the file's order.

    A record with an id updates that plant, or creates it with that id when there is none; a
    record without an id creates a new plant. A new plant needs a name.
    """
    counts = Counter(record.id for record in records if record.id is not None)
    problems = [
        Problem(
            loc=(index, "id"),
            msg=f"id {record.id} appears more than once in the file",
            type="duplicate_key",
            input=record.id,
        )
        for index, record in enumerate(records)
        if record.id is not None and counts[record.id] > 1
    ]
    with transaction.atomic():
        existing = Plant.objects.select_for_update().in_bulk(list(counts))
        problems.extend(
            Problem(loc=(index, "name"), msg="a new plant needs a name", type="missing")
            for index, record in enumerate(records)
            if record.name is None and record.id not in existing
        )
        if problems:
            raise PlantsRefused(sorted(problems, key=lambda p: p.loc))
        plants = []
        created_with_id = False
        for record in records:
            plant = existing.get(record.id) if record.id is not None else None
            if plant is None:
                plant = Plant(pk=record.id)
                created_with_id = created_with_id or record.id is not None
            _apply(plant, record.changes())
            plants.append(plant)
        if created_with_id:
            _reset_id_sequence()
    return plants


def _reset_id_sequence() -> None:
    # PostgreSQL's id sequence does not move for rows inserted with an explicit id; the next
    # plant created without one would collide with them.
    statements = connection.ops.sequence_reset_sql(no_style(), [Plant])
    if statements:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
