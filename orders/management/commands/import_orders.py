from pathlib import Path

from core.files import read_valid_records
from core.management.imports import FileImportCommand
from orders.schemas import OrderRecord
from orders.services import OrdersRefused, orders_import


class Command(FileImportCommand):
    help = (
        "Load orders from a .json file: a list of orders in the API's Order shape, without "
        "order_id (an example: orders/examples/orders.json). Each order needs order_number, "
        "created_at (when it was placed, an ISO 8601 date-time), status, customer (name and "
        "email), items (name, quantity, unit_price, total) and subtotal, vat_total and total. "
        "A null or absent partner_sync_status makes a legacy order, which the partner system "
        "never sees. Creates or updates by order_number, all or nothing, and prints "
        "'<order_number> <order_id>' per order; a bad order is named by its place in the file, "
        "from 1. An order the partner system has acknowledged keeps its acknowledgement; an order "
        "with shipments keeps its items (a file that changes them is refused)."
    )

    noun = "order"
    refused = OrdersRefused

    exists = staticmethod(Path.is_file)

    def import_file(self, file: Path) -> list[str]:
        records = read_valid_records(file, OrderRecord, noun="order", name_field="order_number")
        orders = orders_import(records=[record for _, record in records])
        return [f"{order.order_number} {order.pk}" for order in orders]
