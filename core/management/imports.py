"""The commands that import one file, all or nothing (products, orders, plants)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.files import FileInvalid
from core.problems import Refused


class FileImportCommand(BaseCommand):
    """Imports the file named by its one argument: `import_file` reads it, applies it and
    says what it did, a line each. A file that cannot be read, or records the service
    refuses (`refused`, each record named by `noun` and its place in the file), end the
    command with every problem listed; nothing is imported then."""

    file_help = "Path of the .json file."
    noun = "item"
    refused: type[Refused] = Refused
    # Checked before the file is read: a path that fails it is "no such file" (without it,
    # the reader says what is wrong).
    exists: Callable[[Path], bool] | None = None

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help=self.file_help)

    def handle(self, *args, file: Path, **options):
        if self.exists is not None and not self.exists(file):
            raise CommandError(f"{file}: no such file.")
        try:
            done = self.import_file(file)
        except FileInvalid as exc:
            raise CommandError(str(exc)) from exc
        except self.refused as exc:
            raise CommandError(exc.report(self.noun)) from exc
        for line in done:
            self.stdout.write(line)

    def import_file(self, file: Path) -> list[str]:
        raise NotImplementedError
