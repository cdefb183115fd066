import re

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from core.text import has_invisible_characters
from stock.models import WAREHOUSE_CODE_HELP, WAREHOUSE_CODE_PATTERN, Warehouse
from stock.selectors import warehouse_code_warning
from stock.warehouses import warehouse_save

# The database's integer column.
_INTEGER_MAX = 2**31 - 1
_SELLS = {"yes": True, "no": False}


def _integer(option: str, text: str, *, minimum: int) -> int:
    value = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise CommandError(f"{option} must be a whole number, not {text!r}.")
    number = int(value)
    if not minimum <= number <= _INTEGER_MAX:
        raise CommandError(f"{option} must be from {minimum} to {_INTEGER_MAX}, not {number}.")
    return number


class Command(BaseCommand):
    help = (
        "Create the warehouse CODE, or change the given attributes of the existing one. "
        "Prints 'CODE created' or 'CODE updated'."
    )

    def add_arguments(self, parser):
        parser.add_argument("code", help=f"The warehouse's code: {WAREHOUSE_CODE_HELP}")
        parser.add_argument("--name", help="Its name (a new warehouse without one: its code).")
        parser.add_argument(
            "--priority", help="Lower is taken first when stock is reserved (default 100)."
        )
        parser.add_argument(
            "--lead-time-days",
            help="How long goods from there take, in days (at least 0; default 0).",
        )
        parser.add_argument(
            "--sells", help="yes or no: whether its stock counts towards what the shop sells."
        )

    def handle(self, *args, code, name, priority, lead_time_days, sells, **options):
        if not re.match(WAREHOUSE_CODE_PATTERN, code):
            raise CommandError(f"The code {code!r} is not a warehouse code: {WAREHOUSE_CODE_HELP}")
        if name is not None:
            name = name.strip()
            if not name:
                raise CommandError("--name must not be empty.")
            if has_invisible_characters(name):
                raise CommandError(
                    "--name must not contain control or format characters (tab, newline, ...)."
                )
            max_length = Warehouse._meta.get_field("name").max_length
            if len(name) > max_length:
                raise CommandError(f"--name must be at most {max_length} characters.")
        if priority is not None:
            priority = _integer("--priority", priority, minimum=-_INTEGER_MAX - 1)
        if lead_time_days is not None:
            lead_time_days = _integer("--lead-time-days", lead_time_days, minimum=0)
        if sells is not None:
            if sells.strip().lower() not in _SELLS:
                raise CommandError(f"--sells must be yes or no, not {sells!r}.")
            sells = _SELLS[sells.strip().lower()]
        try:
            with transaction.atomic():
                warehouse, created = warehouse_save(
                    code,
                    name=name,
                    sells=sells,
                    priority=priority,
                    lead_time_days=lead_time_days,
                )
        except ValidationError as exc:
            problems = "; ".join(
                f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items()
            )
            raise CommandError(f"The warehouse {code} was not saved: {problems}") from exc
        self.stdout.write(f"{warehouse.code} {'created' if created else 'updated'}")
        warning = warehouse_code_warning(warehouse.code)
        if warning:
            # Not an error: the warehouse is saved. On stderr, so the line above stays the
            # whole of what scripts read.
            self.stderr.write(self.style.WARNING(f"Warning: {warning}"))
