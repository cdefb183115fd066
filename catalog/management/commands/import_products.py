from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from catalog.files import FileInvalid, read_product_items
from catalog.imports import products_import
from catalog.sync.call import ItemsRefused


class Command(BaseCommand):
    help = (
        "Load products from a .json file (a list of objects) or a .csv file (a header row), "
        "with the API's item field names. Creates or updates by key, all or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="Path of the .json or .csv file.")

    def handle(self, *args, file: Path, **options):
        if not file.exists():
            raise CommandError(f"{file}: no such file.")
        try:
            items = read_product_items(file)
            result = products_import(items=items)
        except FileInvalid as exc:
            raise CommandError(str(exc)) from exc
        except ItemsRefused as exc:
            raise CommandError(exc.report("item")) from exc
        except DatabaseError as exc:
            # Still failing after the retries (a lock held too long, the database gone).
            raise CommandError(
                f"The database refused the import, nothing was imported: {exc}. "
                "Run the command again; if it keeps failing, check the database."
            ) from exc
        self.stdout.write(f"Created {result.created}, updated {result.updated} products.")
