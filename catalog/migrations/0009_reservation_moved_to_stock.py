"""Reservations now belong to the stock app (the same table): the catalogue's state forgets them."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0008_reservation_audit_without_db_foreign_key"),
        ("stock", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Reservation")],
            database_operations=[],
        ),
    ]
