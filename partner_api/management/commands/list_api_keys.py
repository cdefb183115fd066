from django.core.management.base import BaseCommand
from django.utils import timezone

from partner_api.keys import api_key_list
from partner_api.models import key_scope


class Command(BaseCommand):
    help = (
        "List the API keys: name, scope (partner or shop), prefix, created, expiry and whether each is active, revoked "
        "or expired. Key values are never shown (only their hashes are stored)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--active", action="store_true", help="Only keys that are neither revoked nor expired."
        )

    def handle(self, *args, active: bool, **options):
        now = timezone.now()
        rows = []
        for key in api_key_list():
            if key.revoked:
                state = "revoked"
            elif key.expiry_date is not None and key.expiry_date <= now:
                state = "expired"
            else:
                state = "active"
            if active and state != "active":
                continue
            rows.append(
                (
                    key.name,
                    key_scope(key),
                    key.prefix,
                    f"{timezone.localtime(key.created):%Y-%m-%d %H:%M}",
                    f"{timezone.localtime(key.expiry_date):%Y-%m-%d %H:%M}"
                    if key.expiry_date
                    else "never",
                    state,
                )
            )
        if not rows:
            self.stdout.write("No API keys." if not active else "No active API keys.")
            return
        header = ("NAME", "SCOPE", "PREFIX", "CREATED", "EXPIRES", "STATE")
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
        for row in (header, *rows):
            self.stdout.write(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(row, widths, strict=True)
                ).rstrip()
            )
