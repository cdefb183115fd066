"""The "sync operators" group: staff who watch synchronization and resolve pending keys.

They may view everything the partner integration keeps (products, pending keys, sync audits,
product history, the pause switch, orders, plants, API keys) and resolve pending keys (create
products from them, dismiss them), but change nothing else: audits and history are records, and
API keys and the pause switch are for managers.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "sync operators"
VIEWED_APPS = ("catalog", "orders", "plants", "rest_framework_api_key")
EXTRA_PERMISSIONS = (
    ("catalog", "change_pendingproduct"),
    ("catalog", "add_product"),
)


def create_group(apps, schema_editor):
    using = schema_editor.connection.alias
    # Permissions are normally created after all migrations ran; this one needs them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0, using=using)
        app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.using(using).get_or_create(name=GROUP_NAME)
    viewed = Permission.objects.using(using).filter(
        content_type__app_label__in=VIEWED_APPS, codename__startswith="view_"
    )
    group.permissions.add(*viewed)
    for app_label, codename in EXTRA_PERMISSIONS:
        group.permissions.add(
            Permission.objects.using(using).get(
                content_type__app_label=app_label, codename=codename
            )
        )


def delete_group(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.using(schema_editor.connection.alias).filter(name=GROUP_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("catalog", "0001_initial"),
        ("orders", "0001_initial"),
        ("plants", "0001_initial"),
        ("rest_framework_api_key", "0005_auto_20220110_1102"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
