from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog.maintenance import pending_export_csv
from catalog.models import PendingProduct

STATE_CHOICES = (*PendingProduct.State.values, "all")


class Command(BaseCommand):
    help = (
        "Write the pending keys (unknown or ambiguous keys the partner system sent) to a CSV "
        "file with the API's item columns, one row per key and warehouse; completed, it can be "
        "loaded with import_products."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Path of the .csv file to write, or - for stdout.")
        parser.add_argument(
            "--state",
            choices=STATE_CHOICES,
            default=PendingProduct.State.OPEN,
            help="Which pending keys to export (default: open).",
        )

    def handle(self, *args, file: str, state: str, **options):
        states = PendingProduct.State.values if state == "all" else [state]
        if file == "-":
            count = pending_export_csv(stream=self.stdout, states=states)
            self.stderr.write(f"Exported {count} pending key(s).")
            return
        path = Path(file)
        if not path.parent.is_dir():
            raise CommandError(f"{path.parent}: no such directory.")
        try:
            with path.open("w", encoding="utf-8", newline="") as stream:
                count = pending_export_csv(stream=stream, states=states)
        except OSError as exc:
            raise CommandError(f"{path}: cannot be written: {exc}") from exc
        self.stdout.write(f"Exported {count} pending key(s) to {path}.")
