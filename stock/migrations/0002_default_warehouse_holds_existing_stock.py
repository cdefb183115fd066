"""All stock held before warehouses belongs to the default one (`DEFAULT_WAREHOUSE`): a level
per product with its figures, and every reservation pinned there. The reservations' permissions
move with their model, and the sync operators see the new stock records."""

from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEWED = ("view_warehouse", "view_stocklevel", "view_stockmovement", "view_reservation")


def _quoted(schema_editor, name: str) -> str:
    return schema_editor.connection.ops.quote_name(name)


def existing_stock_to_default(apps, schema_editor):
    using = schema_editor.connection.alias
    Warehouse = apps.get_model("stock", "Warehouse")
    StockLevel = apps.get_model("stock", "StockLevel")
    Reservation = apps.get_model("stock", "Reservation")
    Product = apps.get_model("catalog", "Product")
    code = settings.DEFAULT_WAREHOUSE
    warehouse, _ = Warehouse.objects.using(using).get_or_create(code=code, defaults={"name": code})
    q = lambda name: _quoted(schema_editor, name)  # noqa: E731
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {q(StockLevel._meta.db_table)} "
            "(product_id, warehouse_id, quantity, reserved, posted_at, updated_at) "
            f"SELECT p.id, %s, p.shop_quantity, p.reserved, p.posted_at, p.updated_at "
            f"FROM {q(Product._meta.db_table)} AS p",
            [warehouse.pk],
        )
    Reservation.objects.using(using).filter(warehouse__isnull=True).update(warehouse=warehouse)
    _content_type_to(apps, using, source="catalog", target="stock")
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0, using=using)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group = Group.objects.using(using).filter(name="sync operators").first()
    if group is not None:
        group.permissions.add(
            *Permission.objects.using(using).filter(
                content_type__app_label="stock", codename__in=VIEWED
            )
        )


def back_to_catalogue(apps, schema_editor):
    # The products kept their figures (the sums of the levels): only the permissions go back.
    _content_type_to(apps, schema_editor.connection.alias, source="stock", target="catalog")


def _content_type_to(apps, using, *, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(using)
    if not types.filter(app_label=target, model="reservation").exists():
        types.filter(app_label=source, model="reservation").update(app_label=target)


class Migration(migrations.Migration):
    dependencies = [
        ("stock", "0001_initial"),
        ("catalog", "0009_reservation_moved_to_stock"),
        ("partner_api", "0002_shop_side"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(existing_stock_to_default, back_to_catalogue)]
