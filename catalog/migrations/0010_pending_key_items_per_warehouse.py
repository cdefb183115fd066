"""A pending key keeps the last item sent for each warehouse. The payload a key kept before
warehouses was sent for the default one (`DEFAULT_WAREHOUSE`): it becomes that warehouse's item,
with the key's document time, last request and last sighting."""

from datetime import UTC

from django.conf import settings
from django.db import migrations, models

BATCH = 2000


def _time_text(value):
    # As catalog.models.document_time_text writes it (kept here: a migration keeps its own).
    return None if value is None else value.astimezone(UTC).isoformat(timespec="microseconds")


def payload_to_default_warehouse(apps, schema_editor):
    PendingProduct = apps.get_model("catalog", "PendingProduct")
    keys = PendingProduct.objects.using(schema_editor.connection.alias)
    code = settings.DEFAULT_WAREHOUSE
    changed = []
    for pending in keys.order_by("pk").iterator(chunk_size=BATCH):
        pending.warehouse_items = {
            code: {
                "payload": pending.payload if isinstance(pending.payload, dict) else {},
                "posted_at": _time_text(pending.posted_at),
                "request_id": pending.last_request_id,
                "seen_at": _time_text(pending.last_seen),
            }
        }
        changed.append(pending)
        if len(changed) == BATCH:
            keys.bulk_update(changed, ("warehouse_items",))
            changed = []
    keys.bulk_update(changed, ("warehouse_items",))


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0009_reservation_moved_to_stock"),
    ]

    operations = [
        migrations.AddField(
            model_name="pendingproduct",
            name="warehouse_items",
            field=models.JSONField(
                blank=True,
                db_default=models.Value({}, output_field=models.JSONField()),
                default=dict,
                help_text="The last item sent for each warehouse, by code.",
            ),
        ),
        # Backwards the field goes, and `payload` (the newest item) stays as it was.
        migrations.RunPython(payload_to_default_warehouse, migrations.RunPython.noop),
    ]
