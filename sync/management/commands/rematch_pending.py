from django.core.management.base import BaseCommand

from sync.pending import pending_rematch_all


class Command(BaseCommand):
    help = (
        "Resolve every open pending key that a product now answers (created since, by import "
        "or in the admin): its last values are applied unless a newer change reached the "
        "product, and the key is closed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--by",
            default="rematch_pending",
            help="Who resolves, as recorded on each key (default: %(default)s).",
        )

    def handle(self, *args, by: str, **options):
        count = pending_rematch_all(by=by)
        self.stdout.write(f"Resolved {count} pending key(s).")
