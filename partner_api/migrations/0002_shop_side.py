"""Key scopes: every existing key is a partner key; the sync operators see the new records."""

import django.db.models.deletion
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

NEW_VIEWED = (
    ("catalog", "view_reservation"),
    ("orders", "view_orderstatuschange"),
    ("partner_api", "view_apikeyscope"),
)


def existing_keys_are_partner_keys(apps, schema_editor):
    using = schema_editor.connection.alias
    APIKey = apps.get_model("rest_framework_api_key", "APIKey")
    ApiKeyScope = apps.get_model("partner_api", "ApiKeyScope")
    ApiKeyScope.objects.using(using).bulk_create(
        [ApiKeyScope(api_key_id=pk, scope="partner") for pk in APIKey.objects.using(using).values_list("pk", flat=True)]
    )


def operators_view_new_records(apps, schema_editor):
    using = schema_editor.connection.alias
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0, using=using)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group = Group.objects.using(using).filter(name="sync operators").first()
    if group is None:
        return
    for app_label, codename in NEW_VIEWED:
        group.permissions.add(
            *Permission.objects.using(using).filter(
                content_type__app_label=app_label, codename=codename
            )
        )


class Migration(migrations.Migration):
    dependencies = [
        ("partner_api", "0001_sync_operators_group"),
        ("rest_framework_api_key", "0005_auto_20220110_1102"),
        ("catalog", "0005_shop_side"),
        ("orders", "0002_shop_side"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiKeyScope",
            fields=[
                (
                    "api_key",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="scope",
                        serialize=False,
                        to="rest_framework_api_key.apikey",
                    ),
                ),
                (
                    "scope",
                    models.CharField(
                        choices=[("partner", "Partner system"), ("shop", "Shop")],
                        default="partner",
                        max_length=16,
                    ),
                ),
            ],
            options={"verbose_name": "API key scope"},
        ),
        migrations.RunPython(existing_keys_are_partner_keys, migrations.RunPython.noop),
        migrations.RunPython(operators_view_new_records, migrations.RunPython.noop),
    ]
