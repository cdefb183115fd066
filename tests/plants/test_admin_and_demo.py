"""The plant admin (search and filter by tag), the demo plants and the OpenAPI document."""

import pytest
from django.urls import reverse

from plants.demo import seed
from plants.models import Plant, Tag
from tests.plants.factories import PlantFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("staff", "staff@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def garden():
    return {
        "fern": PlantFactory(name="Fern", category="houseplant", tags=["shade", "indoor"]),
        "olive": PlantFactory(name="Olive", category="tree", status="sold", tags=["outdoor"]),
        "palm": PlantFactory(name="Palm", category="houseplant", tags=["indoor"]),
    }


def changelist(staff_client, **params):
    response = staff_client.get(reverse("admin:plants_plant_changelist"), params)
    assert response.status_code == 200
    return {plant.name for plant in response.context["cl"].result_list}


def test_admin_lists_plants_with_their_tags(staff_client, garden):
    response = staff_client.get(reverse("admin:plants_plant_changelist"))
    assert response.status_code == 200
    # In the order they were set.
    assert "shade, indoor" in response.content.decode()


def test_admin_searches_by_tag(staff_client, garden):
    assert changelist(staff_client, q="indoor") == {"Fern", "Palm"}
    assert changelist(staff_client, q="outdoor") == {"Olive"}


def test_admin_search_by_tag_lists_a_plant_once(staff_client, garden):
    response = staff_client.get(reverse("admin:plants_plant_changelist"), {"q": "d"})
    names = [plant.name for plant in response.context["cl"].result_list]
    assert sorted(names) == ["Fern", "Olive", "Palm"]


def test_admin_filters_by_tag_and_status(staff_client, garden):
    shade = Tag.objects.get(name="shade")
    assert changelist(staff_client, tags__id__exact=shade.pk) == {"Fern"}
    assert changelist(staff_client, status__exact="sold") == {"Olive"}


def test_admin_tag_filter_offers_only_tags_in_use(staff_client, garden):
    unused = Tag.objects.create(name="unused-tag")
    page = staff_client.get(reverse("admin:plants_plant_changelist")).content.decode()
    shade = Tag.objects.get(name="shade")
    assert f"tags__id__exact={shade.pk}" in page
    assert f"tags__id__exact={unused.pk}" not in page


def test_admin_edits_a_plant(staff_client, garden):
    fern = garden["fern"]
    response = staff_client.get(reverse("admin:plants_plant_change", args=[fern.pk]))
    assert response.status_code == 200
    response = staff_client.post(
        reverse("admin:plants_plant_change", args=[fern.pk]),
        {
            "name": "Boston fern",
            "category": "fern",
            "status": "pending",
            "tags": [Tag.objects.get(name="outdoor").pk],
        },
    )
    assert response.status_code == 302
    fern.refresh_from_db()
    assert (fern.name, fern.status, fern.tag_names()) == ("Boston fern", "pending", ["outdoor"])


def test_tag_autocomplete_answers(staff_client, garden):
    response = staff_client.get(
        reverse("admin:autocomplete"),
        {"app_label": "plants", "model_name": "plant", "field_name": "tags", "term": "ind"},
    )
    assert response.status_code == 200
    assert [r["text"] for r in response.json()["results"]] == ["indoor"]


def test_demo_seed_creates_a_few_plants_once():
    lines = seed()
    assert len(lines) == 1
    assert Plant.objects.count() >= 3
    assert set(Plant.objects.values_list("status", flat=True)) == {"available", "pending", "sold"}
    assert Tag.objects.exists()
    assert seed() == []
    assert Plant.objects.count() == 4


def test_demo_plant_can_be_updated_through_the_api(api_client):
    seed()
    plant = Plant.objects.first()
    response = api_client.put("/api/v3/plant", {"id": plant.pk, "status": "sold"}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "sold"


def test_openapi_documents_the_plant_operation(api_client):
    response = api_client.get(reverse("schema"), {"format": "json"})
    assert response.status_code == 200
    doc = response.json()
    operation = doc["paths"]["/api/v3/plant"]["put"]
    assert {"200", "400", "401", "404", "415"} <= set(operation["responses"])
    assert operation["security"] == [{"ApiKeyAuth": []}]

    def resolve(ref_holder):
        name = ref_holder["$ref"].rsplit("/", 1)[1]
        return doc["components"]["schemas"][name]

    request = resolve(operation["requestBody"]["content"]["application/json"]["schema"])
    assert request["required"] == ["id"]
    assert request["properties"]["id"]["type"] == "integer"
    assert request["properties"]["id"]["minimum"] == 1
    assert set(request["properties"]) == {"id", "name", "category", "tags", "status"}
    assert doc["components"]["schemas"]["PlantStatus"]["enum"] == ["available", "pending", "sold"]

    ok = resolve(operation["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(ok["properties"]) == {"id", "name", "status", "tags"}
    bad = resolve(operation["responses"]["400"]["content"]["application/json"]["schema"])
    assert bad["properties"]["detail"]["type"] == "array"
    missing = resolve(operation["responses"]["404"]["content"]["application/json"]["schema"])
    assert missing["properties"]["detail"]["type"] == "string"
