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
    # A set: a tag appears once per plant, and tags are listed in alphabetical order.
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
        """Tag names in alphabetical order (served from a prefetch when there is one)."""
        return sorted(tag.name for tag in self.tags.all())
