from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from partner_api.keys import api_key_create
from partner_api.models import KeyScope


class Command(BaseCommand):
    help = (
        "Create an API key: for the partner system (default) or, with --scope shop, for the "
        "shop's storefront. The key is printed once, alone on the last line; only its hash is "
        "stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="A name for the key (who uses it), at most 50 characters.")
        parser.add_argument(
            "--expires-in-days",
            type=int,
            default=None,
            help="Make the key expire after this many days (default: never).",
        )
        parser.add_argument(
            "--scope",
            choices=KeyScope.values,
            default=KeyScope.PARTNER,
            help="partner (default): the partner system's operations; shop: the shop's.",
        )

    def handle(self, *args, name, expires_in_days, scope, **options):
        expiry = None
        if expires_in_days is not None:
            if expires_in_days <= 0:
                raise CommandError("--expires-in-days must be a positive number of days.")
            expiry = timezone.now() + timedelta(days=expires_in_days)
        try:
            api_key, key = api_key_create(name=name, expiry_date=expiry, scope=scope)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        # Scripts take the last line of the output: the key stands there alone.
        self.stdout.write(
            f"Created {scope} API key {api_key.name!r} (prefix {api_key.prefix})"
            + (f", expires {expiry:%Y-%m-%d %H:%M} UTC" if expiry else "")
            + ". Store it now: it is not shown again."
        )
        self.stdout.write(key)
