from django.core.management.base import BaseCommand, CommandError

from partner_api.keys import KeyNotFound, api_key_revoke


class Command(BaseCommand):
    help = "Revoke every active API key with this name; a revoked key is refused with 401."

    def add_arguments(self, parser):
        parser.add_argument("name", help="The key's name, as given when it was created.")

    def handle(self, *args, name, **options):
        try:
            count = api_key_revoke(name=name)
        except KeyNotFound as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Revoked {count} API key(s) named {name!r}.")
