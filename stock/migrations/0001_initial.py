import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


LEVEL_FILLFACTOR = 70


def levels_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"ALTER TABLE stock_stocklevel SET (fillfactor = {LEVEL_FILLFACTOR})"
        )


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('catalog', '0008_reservation_audit_without_db_foreign_key'),
        ('orders', '0003_verbose_names'),
    ]

    operations = [
        migrations.CreateModel(
            name='Warehouse',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('code', models.CharField(help_text='1 to 32 characters of A-Z a-z 0-9 . _ - (case-sensitive).', max_length=32, unique=True, validators=[django.core.validators.RegexValidator('^[A-Za-z0-9._-]{1,32}\\Z', '1 to 32 characters of A-Z a-z 0-9 . _ - (case-sensitive).')])),
                ('name', models.CharField(max_length=255)),
                ('sells', models.BooleanField(default=True, help_text='Whether its stock counts towards what the shop can sell.')),
                ('priority', models.IntegerField(default=100, help_text='Lower is taken first.')),
                ('lead_time_days', models.PositiveIntegerField(default=0, validators=[django.core.validators.MinValueValidator(0)], verbose_name='lead time (days)')),
            ],
            options={
                'ordering': ('priority', 'code'),
            },
        ),
        migrations.CreateModel(
            name='StockMovement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('quantity', 'Quantity'), ('reserved', 'Reserved')], max_length=16, verbose_name='what moved')),
                ('before', models.IntegerField(blank=True, null=True)),
                ('after', models.IntegerField()),
                ('reason', models.CharField(choices=[('sync', 'Sync'), ('import', 'Import'), ('pending_key_resolved', 'Pending key resolved'), ('staff_edit', 'Staff edit'), ('placement', 'Placement'), ('shop_cancellation', 'Shop cancellation'), ('partner_cancellation', 'Partner cancellation'), ('consumption', 'Consumption'), ('unbooking', 'Unbooking')], max_length=32)),
                ('request_id', models.CharField(blank=True, max_length=128, null=True, verbose_name='request ID')),
                ('posted_at', models.DateTimeField(blank=True, null=True, verbose_name='document posted at')),
                ('order_number', models.CharField(blank=True, default='', max_length=128)),
                ('staff_user', models.CharField(blank=True, default='', max_length=150)),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('order', models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='orders.order')),
                ('product', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='movements', to='catalog.product')),
                ('sync_audit', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='catalog.syncaudit')),
                ('warehouse', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='movements', to='stock.warehouse')),
            ],
            options={
                'ordering': ('-created_at', '-id'),
                'indexes': [models.Index(fields=['product', '-created_at'], name='stock_movement_product')],
            },
        ),
        migrations.CreateModel(
            name='StockLevel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('quantity', models.IntegerField(default=0)),
                ('reserved', models.IntegerField(default=0)),
                ('posted_at', models.DateTimeField(blank=True, null=True, verbose_name='document posted at')),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('product', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='levels', to='catalog.product')),
                ('warehouse', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='levels', to='stock.warehouse')),
            ],
            options={
                'ordering': ('product', 'warehouse'),
                'constraints': [models.UniqueConstraint(fields=('product', 'warehouse'), name='stock_level_key')],
            },
        ),
        # Room in every page for a level's next figure: PostgreSQL keeps the new version on the
        # row's own page and writes no index (no indexed column changes), as for the products.
        migrations.RunPython(levels_fillfactor, migrations.RunPython.noop),
        # The reservations move from the catalogue: the same table, now also in the stock's
        # state; only the warehouse column is new (filled by 0002, required by 0003).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Reservation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('quantity', models.PositiveIntegerField()),
                        ('state', models.CharField(choices=[('open', 'Open'), ('consumed', 'Consumed'), ('released', 'Released')], default='open', max_length=16)),
                        ('booked_at', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('changed_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('cause', models.CharField(blank=True, default='', max_length=255)),
                        ('order', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reservations', to='orders.order')),
                        ('product', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reservations', to='catalog.product')),
                        ('sync_audit', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='catalog.syncaudit')),
                    ],
                    options={
                        'db_table': 'catalog_reservation',
                        'ordering': ('-created_at', '-id'),
                        'indexes': [models.Index(condition=models.Q(('state', 'open')), fields=['product', 'booked_at'], name='catalog_reservation_open')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.AddField(
            model_name='reservation',
            name='warehouse',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='reservations', to='stock.warehouse'),
        ),
    ]
