"""Each reservation names the order line whose units it holds (a line's units may come from
several warehouses, one reservation each). The reservations made before held one line each,
the line naming their product: it is found by its key, as the placement matched it."""

import django.db.models.deletion
from django.db import migrations, models

CHUNK = 1000


def reservations_name_their_lines(apps, schema_editor):
    Reservation = apps.get_model("stock", "Reservation")
    OrderItem = apps.get_model("orders", "OrderItem")
    rows = list(
        Reservation.objects.filter(item__isnull=True)
        .order_by("pk")
        .values_list("pk", "order_id", "product__stock_code", "product__ean")
    )
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        lines: dict[int, list[tuple[int, str | None, str | None]]] = {}
        for item_id, order_id, stock_code, ean in (
            OrderItem.objects.filter(order_id__in={row[1] for row in chunk})
            .order_by("pk")
            .values_list("pk", "order_id", "stock_code", "ean")
        ):
            lines.setdefault(order_id, []).append((item_id, stock_code, ean))
        named = []
        for pk, order_id, stock_code, ean in chunk:
            # A line sent without an EAN named the product by its stock code alone.
            item_id = next(
                (
                    item_id
                    for item_id, line_code, line_ean in lines.get(order_id, ())
                    if line_code == stock_code and (not line_ean or line_ean == ean)
                ),
                None,
            )
            if item_id is not None:
                named.append(Reservation(pk=pk, item_id=item_id))
        Reservation.objects.bulk_update(named, ["item"])


class Migration(migrations.Migration):
    dependencies = [
        ("orders", "0003_verbose_names"),
        ("stock", "0003_reservation_warehouse_required"),
    ]

    operations = [
        migrations.AddField(
            model_name="reservation",
            name="item",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="reservations",
                to="orders.orderitem",
                verbose_name="order line",
            ),
        ),
        migrations.RunPython(reservations_name_their_lines, migrations.RunPython.noop),
    ]
