from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from orders.files import FileInvalid, read_order_records
from orders.services import OrdersRefused, orders_import


class Command(BaseCommand):
    help = (
        "Load orders from a .json file: a list of orders in the API's Order shape, without "
        "order_id. A null or absent partner_sync_status makes a legacy order, which the partner "
        "system never sees. Creates or updates by order_number, all or nothing, and prints "
        "'<order_number> <order_id>' per order. An order the partner system has acknowledged "
        "keeps its acknowledgement."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="Path of the .json file.")

    def handle(self, *args, file: Path, **options):
        if not file.is_file():
            raise CommandError(f"{file}: no such file.")
        try:
            records = read_order_records(file)
            orders = orders_import(records=records)
        except FileInvalid as exc:
            raise CommandError(str(exc)) from exc
        except OrdersRefused as exc:
            raise CommandError(
                "Nothing was imported. Problems:\n" + "\n".join(exc.problems)
            ) from exc
        for order in orders:
            self.stdout.write(f"{order.order_number} {order.pk}")
