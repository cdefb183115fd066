from django.apps import AppConfig


class PartnerApiConfig(AppConfig):
    name = "partner_api"
    verbose_name = "Partner API"

    def ready(self) -> None:
        from partner_api import schema_extensions  # noqa: F401  (registers the extension)
