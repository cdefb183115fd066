from pathlib import Path

from django.core.management.base import CommandError
from django.db import DatabaseError

from core.management.imports import FileImportCommand
from sync.call import ItemsRefused
from sync.files import read_product_items
from sync.imports import products_import


class Command(FileImportCommand):
    help = (
        "Load products from a .json file (a list of objects) or a .csv file (a header row; "
        "separated by commas or semicolons), with the API's item field names. Creates or "
        "updates by key, all or nothing."
    )

    file_help = "Path of the .json or .csv file."
    refused = ItemsRefused

    exists = staticmethod(Path.exists)

    def import_file(self, file: Path) -> list[str]:
        items = read_product_items(file)
        try:
            result = products_import(items=items)
        except DatabaseError as exc:
            # Still failing after the retries (a lock held too long, the database gone).
            raise CommandError(
                f"The database refused the import, nothing was imported: {exc}. "
                "Run the command again; if it keeps failing, check the database."
            ) from exc
        done = [f"Created {result.created}, updated {result.updated} products."]
        if result.pending_resolved:
            # What the file set stands; the keys filled in only what it left out.
            done.append(
                f"Resolved {result.pending_resolved} pending key(s); applied "
                f"{result.pending_levels} warehouse level(s) and {result.pending_fields} "
                "field(s) of theirs where the file gave none."
            )
        return done
