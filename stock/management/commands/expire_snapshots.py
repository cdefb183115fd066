from django.core.management.base import BaseCommand

from stock.snapshots import snapshot_expire_due


class Command(BaseCommand):
    help = (
        "Mark every full snapshot still open or held past its expiry (SNAPSHOT_TTL_HOURS after "
        "its opening) expired, and print how many. Nothing is zeroed; run it from cron (every "
        "snapshot is also expired when it is next read)."
    )

    def handle(self, *args, **options):
        expired = snapshot_expire_due()
        self.stdout.write(f"{expired} snapshot(s) expired")
