import factory
from factory.django import DjangoModelFactory

from plants.models import Plant, Tag
from plants.services import plant_tags_set


class TagFactory(DjangoModelFactory):
    class Meta:
        model = Tag
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tag-{n}")


class PlantFactory(DjangoModelFactory):
    class Meta:
        model = Plant
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Plant {n}")
    category = "houseplant"
    status = Plant.Status.AVAILABLE

    @factory.post_generation
    def tags(self, create, extracted, **kwargs):
        """`PlantFactory(tags=["indoor", "shade"])` gives the plant those tags, in that order."""
        if create and extracted:
            plant_tags_set(plant=self, names=extracted)
