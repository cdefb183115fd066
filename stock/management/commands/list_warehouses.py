from django.core.management.base import BaseCommand

from stock.models import Warehouse


class Command(BaseCommand):
    help = (
        "One line per warehouse, in the order units are taken (priority, then code): code, "
        "sells (yes/no), priority, lead time in days, name, separated by tabs."
    )

    def handle(self, *args, **options):
        warehouses = list(Warehouse.objects.all())
        # Codes compared by code points, whatever the database's collation.
        warehouses.sort(key=lambda warehouse: (warehouse.priority, warehouse.code))
        for warehouse in warehouses:
            self.stdout.write(
                "\t".join(
                    (
                        warehouse.code,
                        "yes" if warehouse.sells else "no",
                        str(warehouse.priority),
                        str(warehouse.lead_time_days),
                        warehouse.name,
                    )
                )
            )
