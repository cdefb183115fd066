from django.core.management.base import BaseCommand, CommandError

from catalog.maintenance import PURGE_BATCH_SIZE, sync_audits_purge
from stock.movements import movements_purge


class Command(BaseCommand):
    help = (
        "Delete sync audits older than DAYS days with the product history rows they left, the "
        "idempotency records past the retention window, and the resolved and dismissed pending "
        "keys older than DAYS days (open ones never), and the stock movements older than DAYS "
        "days but those of orders with an open reservation. Prints what it removed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=int,
            required=True,
            metavar="DAYS",
            help="Remove audits created more than DAYS days ago (at least 1).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Only count what would be removed."
        )

    def handle(self, *args, older_than: int, dry_run: bool, **options):
        if older_than < 1:
            raise CommandError(f"--older-than must be at least 1 (days); got {older_than}.")
        result = sync_audits_purge(older_than_days=older_than, dry_run=dry_run)
        movements = movements_purge(before=result.cutoff, dry_run=dry_run, batch=PURGE_BATCH_SIZE)
        verb = "Would remove" if result.dry_run else "Removed"
        self.stdout.write(
            f"{verb} {result.audits} sync audit(s) older than {result.cutoff:%Y-%m-%d %H:%M %Z}, "
            f"{result.history} product history row(s) and "
            f"{result.idempotency_records} expired idempotency record(s)."
        )
        self.stdout.write(
            f"{verb} {result.pending_keys} resolved or dismissed pending key(s) closed and last "
            "seen before then (open ones are kept)."
        )
        self.stdout.write(
            f"{verb} {movements} stock movement(s) recorded before then (those of orders with "
            "an open reservation are kept)."
        )
