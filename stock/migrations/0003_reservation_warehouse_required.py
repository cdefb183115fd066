import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("stock", "0002_default_warehouse_holds_existing_stock")]

    operations = [
        migrations.AlterField(
            model_name="reservation",
            name="warehouse",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="reservations",
                to="stock.warehouse",
            ),
        ),
    ]
