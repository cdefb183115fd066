"""Products: one index for the key (stock_code first, so lookups by stock_code alone use it)
and room in every page for the sync's updates (PostgreSQL's fillfactor).

A sync rewrites each product it names. With free space on the row's own page PostgreSQL keeps
the new version there and writes no index (a heap-only tuple update), as long as no indexed
column changes, which a sync never does. Pages written before this migration keep their fill
until their rows move; `VACUUM FULL catalog_product` (docs/DEPLOYMENT.md) rewrites them at once.
"""

from django.db import migrations, models

PRODUCT_FILLFACTOR = 70


def set_fillfactor(apps, schema_editor, value=PRODUCT_FILLFACTOR):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE catalog_product SET (fillfactor = {int(value)})")


def reset_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE catalog_product RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0006_verbose_names"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="product",
            name="catalog_product_key",
        ),
        migrations.AddConstraint(
            model_name="product",
            constraint=models.UniqueConstraint(
                fields=("stock_code", "ean"), name="catalog_product_key"
            ),
        ),
        migrations.AlterField(
            model_name="product",
            name="stock_code",
            field=models.CharField(max_length=64),
        ),
        migrations.RunPython(set_fillfactor, reset_fillfactor),
    ]
