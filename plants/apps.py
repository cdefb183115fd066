from django.apps import AppConfig


class PlantsConfig(AppConfig):
    name = "plants"
