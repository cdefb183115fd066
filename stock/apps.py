from django.apps import AppConfig
from django.core import checks
from django.db.models.signals import post_migrate


class StockConfig(AppConfig):
    name = "stock"
    verbose_name = "Stock"

    def ready(self) -> None:
        checks.register(default_warehouse_check)
        post_migrate.connect(default_warehouse_created, sender=self)


def default_warehouse_created(*, using: str = "default", apps=None, **kwargs) -> None:
    """After the migrations, the default warehouse exists (sells, priority 100, lead time 0,
    named by its code)."""
    from django.conf import settings

    from stock.models import Warehouse

    code = settings.DEFAULT_WAREHOUSE
    Warehouse.objects.using(using).get_or_create(code=code, defaults={"name": code})


def default_warehouse_check(app_configs=None, databases=None, **kwargs):
    """A warning (so that `migrate` still runs) while DEFAULT_WAREHOUSE names no warehouse."""
    from django.conf import settings
    from django.db import DatabaseError

    from stock.models import Warehouse

    code = settings.DEFAULT_WAREHOUSE
    try:
        exists = Warehouse.objects.filter(code=code).exists()
    except DatabaseError:
        # No database yet, or not migrated: `migrate` makes it.
        return []
    if exists:
        return []
    return [
        checks.Warning(
            f"DEFAULT_WAREHOUSE is {code!r}, and no warehouse has that code.",
            hint=(
                f"Run `manage.py migrate` (it creates it), or `manage.py create_warehouse {code}`, "
                "or set DEFAULT_WAREHOUSE to an existing warehouse's code."
            ),
            id="stock.W001",
        )
    ]
