from django.contrib import admin

from plants.models import TAGS_IN_ORDER, Plant, Tag


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ("name",)
    search_fields = ("name",)


@admin.register(Plant)
class PlantAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "category", "status", "tag_list", "updated_at")
    # Only tags some plant carries: a tag removed from every plant stays in its table.
    list_filter = ("status", "category", ("tags", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "category", "tags__name")
    autocomplete_fields = ("tags",)
    readonly_fields = ("created_at", "updated_at")

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related(TAGS_IN_ORDER)

    @admin.display(description="tags")
    def tag_list(self, plant: Plant) -> str:
        return ", ".join(plant.tag_names())
