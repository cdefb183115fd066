"""The sync operators review full snapshots: they see them, and commit a held one by typing its
absent count or abandon it (both need the change permission)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GRANTED = ("view_stocksnapshot", "change_stocksnapshot")


def grant(apps, schema_editor):
    using = schema_editor.connection.alias
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
                content_type__app_label="stock", codename__in=GRANTED
            )
        )


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    using = schema_editor.connection.alias
    group = Group.objects.using(using).filter(name="sync operators").first()
    if group is not None:
        group.permissions.remove(
            *Permission.objects.using(using).filter(
                content_type__app_label="stock", codename__in=GRANTED
            )
        )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("partner_api", "0001_sync_operators_group"),
        ("stock", "0007_snapshots"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
