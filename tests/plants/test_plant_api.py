"""PUT /api/v3/plant through HTTP: authentication, the id rule, partial updates, validation."""

import pytest
from django.urls import reverse

from partner_api.keys import api_key_revoke
from plants.models import Plant, Tag
from tests.plants.factories import PlantFactory

pytestmark = pytest.mark.django_db


def url() -> str:
    return reverse("partner_api:plant")


def put(client, body, **kwargs):
    return client.put(url(), body, format="json", **kwargs)


def invalid_id(input_present: bool = True, value=None) -> dict:
    entry = {"loc": ["body", "id"], "msg": "Invalid ID supplied", "type": "invalid_id"}
    if input_present:
        entry["input"] = value
    return {"detail": [entry]}


# --- authentication -------------------------------------------------------------------------


def test_no_key_is_401_before_the_body_is_read(anon_client):
    plant = PlantFactory(name="Fern")
    response = anon_client.put(url(), "{not json", content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("ApiKey")
    assert response.json() == {
        "detail": "Authentication credentials were not provided: send the key as X-API-Key: <key>."
    }
    plant.refresh_from_db()
    assert plant.name == "Fern"


def test_bad_key_is_401(anon_client):
    plant = PlantFactory(name="Fern")
    anon_client.credentials(HTTP_X_API_KEY="not-a-key")
    response = put(anon_client, {"id": plant.pk, "name": "Palm"})
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid API key."}
    plant.refresh_from_db()
    assert plant.name == "Fern"


def test_revoked_key_is_401(api_client):
    plant = PlantFactory(name="Fern")
    api_key_revoke(name="erp")
    response = put(api_client, {"id": plant.pk, "name": "Palm"})
    assert response.status_code == 401
    assert isinstance(response.json()["detail"], str)
    plant.refresh_from_db()
    assert plant.name == "Fern"


def test_bad_key_with_bad_body_is_401(anon_client):
    anon_client.credentials(HTTP_X_API_KEY="not-a-key")
    response = put(anon_client, {"id": "x", "status": "dead"})
    assert response.status_code == 401


# --- the valid call ---------------------------------------------------------------------------


def test_full_update_returns_the_plant(api_client):
    plant = PlantFactory(name="Fern", category="houseplant", tags=["shade"])
    response = put(
        api_client,
        {
            "id": plant.pk,
            "name": "Boston fern",
            "category": "fern",
            "status": "sold",
            "tags": ["indoor", "humid"],
        },
    )
    assert response.status_code == 200
    assert response.json() == {
        "id": plant.pk,
        "name": "Boston fern",
        "status": "sold",
        "tags": ["indoor", "humid"],
    }
    plant.refresh_from_db()
    assert (plant.name, plant.category, plant.status) == ("Boston fern", "fern", "sold")
    assert plant.tag_names() == ["indoor", "humid"]


def test_trailing_slash_answers_the_same(api_client):
    plant = PlantFactory(name="Fern")
    response = api_client.put(url() + "/", {"id": plant.pk, "name": "Palm"}, format="json")
    assert response.status_code == 200
    assert response.json()["name"] == "Palm"


def test_literal_path_is_the_contract(api_client):
    plant = PlantFactory(name="Fern")
    response = api_client.put("/api/v3/plant", {"id": plant.pk}, format="json")
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"name": "Palm"}, {"name": "Palm"}),
        ({"category": "tree"}, {"category": "tree"}),
        ({"status": "pending"}, {"status": "pending"}),
        ({"tags": ["a", "b"]}, {"tags": ["a", "b"]}),
    ],
)
def test_partial_update_changes_only_the_fields_present(api_client, change, expected):
    plant = PlantFactory(name="Fern", category="houseplant", status="available", tags=["shade"])
    before = {"name": "Fern", "category": "houseplant", "status": "available", "tags": ["shade"]}
    response = put(api_client, {"id": plant.pk, **change})
    assert response.status_code == 200
    plant.refresh_from_db()
    after = {
        "name": plant.name,
        "category": plant.category,
        "status": plant.status,
        "tags": plant.tag_names(),
    }
    assert after == {**before, **expected}


def test_id_alone_changes_nothing(api_client):
    plant = PlantFactory(name="Fern", status="pending", tags=["shade"])
    response = put(api_client, {"id": plant.pk})
    assert response.status_code == 200
    assert response.json() == {
        "id": plant.pk,
        "name": "Fern",
        "status": "pending",
        "tags": ["shade"],
    }


def test_null_leaves_a_field_as_it_is(api_client):
    plant = PlantFactory(name="Fern", category="houseplant", status="pending", tags=["shade"])
    response = put(
        api_client,
        {"id": plant.pk, "name": None, "category": None, "status": None, "tags": None},
    )
    assert response.status_code == 200
    assert response.json() == {
        "id": plant.pk,
        "name": "Fern",
        "status": "pending",
        "tags": ["shade"],
    }
    plant.refresh_from_db()
    assert plant.category == "houseplant"


def test_empty_values_clear_category_and_tags(api_client):
    plant = PlantFactory(category="houseplant", tags=["shade", "indoor"])
    response = put(api_client, {"id": plant.pk, "category": "", "tags": []})
    assert response.status_code == 200
    assert response.json()["tags"] == []
    plant.refresh_from_db()
    assert plant.category == ""
    assert plant.tags.count() == 0


def test_tags_are_a_set_shared_between_plants(api_client):
    first = PlantFactory(tags=["indoor"])
    second = PlantFactory()
    response = put(api_client, {"id": second.pk, "tags": ["shade", "indoor", "shade", " indoor "]})
    assert response.status_code == 200
    # In the order sent, a repeated tag kept once at its first place.
    assert response.json()["tags"] == ["shade", "indoor"]
    assert Tag.objects.filter(name="indoor").count() == 1
    assert first.tag_names() == ["indoor"]


def test_strings_are_stripped(api_client):
    plant = PlantFactory()
    response = put(api_client, {"id": plant.pk, "name": "  Palm  ", "category": " tree "})
    assert response.status_code == 200
    plant.refresh_from_db()
    assert (plant.name, plant.category) == ("Palm", "tree")


def test_unknown_fields_are_ignored(api_client):
    plant = PlantFactory(name="Fern")
    response = put(api_client, {"id": plant.pk, "photoUrls": ["x"], "name": "Palm"})
    assert response.status_code == 200
    assert response.json()["name"] == "Palm"


def test_longest_legal_values_are_accepted(api_client):
    plant = PlantFactory()
    tags = [f"{i:02d}" + "t" * 62 for i in range(50)]
    body = {"id": plant.pk, "name": "n" * 255, "category": "c" * 128, "tags": tags}
    response = put(api_client, body)
    assert response.status_code == 200
    assert response.json()["tags"] == tags
    plant.refresh_from_db()
    assert plant.name == "n" * 255
    assert plant.category == "c" * 128


def test_unicode_values_round_trip(api_client):
    plant = PlantFactory()
    response = put(api_client, {"id": plant.pk, "name": "Žlutý kosatec 🌱", "tags": ["vodní"]})
    assert response.status_code == 200
    assert response.json()["name"] == "Žlutý kosatec 🌱"
    assert response.json()["tags"] == ["vodní"]


# --- the id rule ------------------------------------------------------------------------------


def test_missing_id_is_400_invalid_id(api_client):
    response = put(api_client, {"name": "Palm"})
    assert response.status_code == 400
    assert response.json() == invalid_id(input_present=False)


def test_null_id_is_400_invalid_id(api_client):
    response = put(api_client, {"id": None, "name": "Palm"})
    assert response.status_code == 400
    assert response.json() == invalid_id(input_present=False)


@pytest.mark.parametrize(
    "value",
    ["1", "abc", "", True, False, 1.0, 1.5, 0, -1, 2**63, 10**40],
    ids=repr,
)
def test_non_positive_integer_id_is_400_invalid_id(api_client, value):
    plant = PlantFactory(pk=1, name="Fern")
    response = put(api_client, {"id": value, "name": "Palm"})
    assert response.status_code == 400
    body = response.json()
    assert body["detail"][0]["loc"] == ["body", "id"]
    assert body["detail"][0]["msg"] == "Invalid ID supplied"
    assert body["detail"][0]["type"] == "invalid_id"
    plant.refresh_from_db()
    assert plant.name == "Fern"


def test_invalid_id_echoes_the_input(api_client):
    response = put(api_client, {"id": "abc"})
    assert response.json() == invalid_id(value="abc")


@pytest.mark.parametrize("value", [[1], {"id": 1}], ids=repr)
def test_structured_id_is_400_without_echo(api_client, value):
    response = put(api_client, {"id": value})
    assert response.status_code == 400
    assert response.json() == invalid_id(input_present=False)


def test_unknown_id_is_404(api_client):
    PlantFactory(pk=5)
    response = put(api_client, {"id": 6, "name": "Palm"})
    assert response.status_code == 404
    assert response.json() == {"detail": "Plant not found"}
    assert not Plant.objects.filter(name="Palm").exists()


def test_largest_id_is_404_not_an_error(api_client):
    response = put(api_client, {"id": 2**63 - 1})
    assert response.status_code == 404
    assert response.json() == {"detail": "Plant not found"}


# --- field validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "loc", "kind"),
    [
        ("status", "dead", ["body", "status"], "enum"),
        ("status", "AVAILABLE", ["body", "status"], "enum"),
        ("status", 1, ["body", "status"], "enum"),
        ("name", "", ["body", "name"], "string_too_short"),
        ("name", "   ", ["body", "name"], "string_too_short"),
        ("name", "n" * 256, ["body", "name"], "string_too_long"),
        ("name", 123, ["body", "name"], "string_type"),
        ("name", ["a"], ["body", "name"], "string_type"),
        ("name", "a\x00b", ["body", "name"], "string_nul_character"),
        ("category", "c" * 129, ["body", "category"], "string_too_long"),
        ("category", True, ["body", "category"], "string_type"),
        ("tags", "indoor", ["body", "tags"], "list_type"),
        ("tags", {"a": 1}, ["body", "tags"], "list_type"),
        ("tags", ["ok", 5], ["body", "tags", 1], "string_type"),
        ("tags", ["ok", None], ["body", "tags", 1], "string_type"),
        ("tags", ["ok", ""], ["body", "tags", 1], "string_too_short"),
        ("tags", ["t" * 65], ["body", "tags", 0], "string_too_long"),
        ("tags", [f"t{i}" for i in range(51)], ["body", "tags"], "too_long"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_invalid_field_is_400_with_loc(api_client, field, value, loc, kind):
    plant = PlantFactory(name="Fern", category="houseplant", status="available", tags=["shade"])
    response = put(api_client, {"id": plant.pk, field: value})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert [(p["loc"], p["type"]) for p in detail] == [(loc, kind)]
    assert all(isinstance(p["msg"], str) and p["msg"] for p in detail)
    plant.refresh_from_db()
    assert (plant.name, plant.category, plant.status) == ("Fern", "houseplant", "available")
    assert plant.tag_names() == ["shade"]


def test_every_problem_is_listed_and_nothing_changes(api_client):
    plant = PlantFactory(name="Fern")
    response = put(api_client, {"id": "x", "name": "", "status": "gone", "tags": [1]})
    assert response.status_code == 400
    assert response.json()["detail"][0]["loc"] == ["body", "id"]
    locs = sorted(tuple(map(str, p["loc"])) for p in response.json()["detail"])
    assert locs == sorted(
        [("body", "id"), ("body", "name"), ("body", "status"), ("body", "tags", "0")]
    )
    plant.refresh_from_db()
    assert plant.name == "Fern"


def test_invalid_field_of_unknown_plant_is_400(api_client):
    response = put(api_client, {"id": 999, "status": "dead"})
    assert response.status_code == 400
    assert response.json()["detail"][0]["loc"] == ["body", "status"]


# --- malformed requests -------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"id": 1, "id": 2}', b'{"id": NaN}', b"\xff\xfe", b'{"id": 1'],
    ids=repr,
)
def test_malformed_json_is_400(api_client, raw):
    PlantFactory(pk=1)
    response = api_client.put(url(), raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert response.json()["detail"][0]["type"] == "json_invalid"


@pytest.mark.parametrize("body", [[], [{"id": 1}], "plant", 1, None], ids=repr)
def test_body_that_is_not_an_object_is_400(api_client, body):
    PlantFactory(pk=1)
    response = api_client.put(url(), body, format="json")
    assert response.status_code == 400
    assert response.json()["detail"]


def test_deeply_nested_body_is_400(api_client):
    raw = b"[" * 100_000 + b"]" * 100_000
    response = api_client.put(url(), raw, content_type="application/json")
    assert response.status_code == 400


def test_wrong_content_type_is_415(api_client):
    plant = PlantFactory(name="Fern")
    response = api_client.put(url(), f"id={plant.pk}&name=Palm", content_type="text/plain")
    assert response.status_code == 415
    assert isinstance(response.json()["detail"], str)
    plant.refresh_from_db()
    assert plant.name == "Fern"


@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
def test_other_methods_are_405(api_client, method):
    response = getattr(api_client, method)(url())
    assert response.status_code == 405
    assert isinstance(response.json()["detail"], str)


def test_tags_keep_the_order_sent_on_every_update(api_client):
    plant = PlantFactory(tags=["alpha", "beta"])
    response = put(api_client, {"id": plant.pk, "tags": ["zeta", "beta", "alpha", "zeta"]})
    assert response.json()["tags"] == ["zeta", "beta", "alpha"]
    response = put(api_client, {"id": plant.pk, "tags": ["alpha", "zeta", "beta"]})
    assert response.json()["tags"] == ["alpha", "zeta", "beta"]
    plant.refresh_from_db()
    assert plant.tag_names() == ["alpha", "zeta", "beta"]
