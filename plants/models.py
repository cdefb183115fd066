from django.db import models

NAME_MAX_LENGTH = 255
CATEGORY_MAX_LENGTH = 128
TAG_MAX_LENGTH = 64
MAX_TAGS = 50


class Tag(models.Model):
    """A label plants share; a table of its own so the admin can search and filter by it on
    every database (JSON containment lookups are PostgreSQL-only)."""

    name = models.CharField(max_length=TAG_MAX_LENGTH, unique=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class PlantStatus(models.TextChoices):
    AVAILABLE = "available", "Available"
    PENDING = "pending", "Pending"
    SOLD = "sold", "Sold"


class Plant(models.Model):
    """A plant of the catalogue, updated by the plant operation and the import command."""

    Status = PlantStatus

    name = models.CharField(max_length=NAME_MAX_LENGTH)
    category = models.CharField(max_length=CATEGORY_MAX_LENGTH, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.AVAILABLE, db_index=True
    )
    # A tag appears once per plant; the tags are listed in the order they were set in, which
    # is the order of their link rows (see `plants.services`).
    tags = models.ManyToManyField(Tag, blank=True, related_name="plants")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("id",)
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=PlantStatus.values),
                name="plants_plant_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def tag_names(self) -> list[str]:
        """Tag names in the order they were set (from a `TAGS_IN_ORDER` prefetch if there is one)."""
        tags = getattr(self, "ordered_tags", None)
        if tags is None:
            tags = tags_in_order(self.tags.all())
        return [tag.name for tag in tags]


def tags_in_order(tags: models.QuerySet[Tag]) -> models.QuerySet[Tag]:
    """A plant's tags in the order they were set: the order of their link rows."""
    return tags.extra(order_by=[f"{Plant.tags.through._meta.db_table}.id"])


# Prefetch the tags of many plants in their order: `.prefetch_related(TAGS_IN_ORDER)`.
TAGS_IN_ORDER = models.Prefetch(
    "tags", queryset=tags_in_order(Tag.objects.all()), to_attr="ordered_tags"
)
