"""`manage.py import_plants FILE.json`: creates or updates, prints `<id> <name>`, all or nothing."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from plants.models import TAGS_IN_ORDER, Plant
from tests.plants.factories import PlantFactory

pytestmark = pytest.mark.django_db


def run(path) -> str:
    out = StringIO()
    call_command("import_plants", str(path), stdout=out)
    return out.getvalue()


def write(tmp_path, data, name="plants.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def snapshot() -> list[tuple]:
    return [
        (p.pk, p.name, p.category, p.status, tuple(p.tag_names()))
        for p in Plant.objects.prefetch_related(TAGS_IN_ORDER)
    ]


def test_creates_plants_and_prints_one_line_each(tmp_path):
    path = write(
        tmp_path,
        [
            {"name": "Fern", "category": "houseplant", "tags": ["shade", "indoor"]},
            {"name": "Olive", "status": "sold"},
        ],
    )
    output = run(path)
    fern = Plant.objects.get(name="Fern")
    olive = Plant.objects.get(name="Olive")
    assert output.splitlines() == [f"{fern.pk} Fern", f"{olive.pk} Olive"]
    assert (fern.category, fern.status, fern.tag_names()) == (
        "houseplant",
        "available",
        ["shade", "indoor"],
    )
    assert (olive.category, olive.status, olive.tag_names()) == ("", "sold", [])


def test_updates_by_id_and_leaves_absent_fields(tmp_path):
    plant = PlantFactory(name="Fern", category="houseplant", status="available", tags=["shade"])
    output = run(write(tmp_path, [{"id": plant.pk, "status": "pending"}]))
    assert output.splitlines() == [f"{plant.pk} Fern"]
    assert snapshot() == [(plant.pk, "Fern", "houseplant", "pending", ("shade",))]


def test_unknown_id_is_created_with_that_id_and_later_plants_do_not_collide(tmp_path, api_client):
    output = run(write(tmp_path, [{"id": 500, "name": "Palm"}]))
    assert output.splitlines() == ["500 Palm"]
    output = run(write(tmp_path, [{"name": "Cactus"}], name="more.json"))
    cactus = Plant.objects.get(name="Cactus")
    assert cactus.pk > 500
    assert output.splitlines() == [f"{cactus.pk} Cactus"]
    # The imported plant answers through the API like any other.
    response = api_client.put(
        reverse("partner_api:plant"), {"id": 500, "tags": ["tropical"]}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {
        "id": 500,
        "name": "Palm",
        "status": "available",
        "tags": ["tropical"],
    }


def test_import_twice_gives_the_same_state(tmp_path):
    path = write(tmp_path, [{"id": 7, "name": "Fern", "tags": ["a"]}])
    run(path)
    first = snapshot()
    run(path)
    assert snapshot() == first


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"name": "Fern", "status": "dead"}, "item 2: status: Input should be"),
        ({"name": "Fern", "tags": "indoor"}, "item 2: tags: Input should be a valid list"),
        ({"name": "Fern", "tags": ["ok", 3]}, "item 2: tags.1: Input should be a valid string"),
        ({"name": "n" * 256}, "item 2: name: String should have at most 255 characters"),
        ({"id": "7", "name": "Fern"}, "item 2: id: Invalid ID supplied"),
        ({"id": 0, "name": "Fern"}, "item 2: id: Invalid ID supplied"),
        ({"category": "tree"}, "item 2: a new plant needs a name"),
        ({"id": 999, "category": "tree"}, "item 2: a new plant needs a name"),
        ("not an object", "item 2: not an object"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_bad_entry_is_a_clear_error_and_nothing_is_imported(tmp_path, entry, expected):
    existing = PlantFactory(name="Fern", status="available", tags=["shade"])
    before = snapshot()
    path = write(tmp_path, [{"id": existing.pk, "name": "Renamed", "tags": []}, entry])
    with pytest.raises(CommandError) as excinfo:
        run(path)
    message = str(excinfo.value)
    assert message.startswith("Nothing was imported.")
    assert expected in message
    assert snapshot() == before


def test_duplicate_ids_are_refused(tmp_path):
    path = write(tmp_path, [{"id": 3, "name": "A"}, {"id": 3, "name": "B"}])
    with pytest.raises(CommandError, match="item 1: id 3 appears more than once"):
        run(path)
    assert Plant.objects.count() == 0


def test_every_problem_is_named(tmp_path):
    path = write(tmp_path, [{"name": ""}, {"name": "ok"}, {"status": "x", "name": 5}])
    with pytest.raises(CommandError) as excinfo:
        run(path)
    message = str(excinfo.value)
    assert "item 1: name:" in message
    assert "item 3: name:" in message
    assert "item 3: status:" in message
    assert "item 2" not in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "cannot be read"),
        ('{"name": "Fern"}', "must hold a JSON list"),
    ],
)
def test_unreadable_file_is_a_clear_error(tmp_path, content, expected):
    with pytest.raises(CommandError, match=expected):
        run(write(tmp_path, content))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="cannot be read"):
        run(tmp_path / "nope.json")


def test_empty_list_imports_nothing(tmp_path):
    assert run(write(tmp_path, [])) == ""
    assert Plant.objects.count() == 0
