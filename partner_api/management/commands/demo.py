import secrets
import socket
from importlib import import_module
from importlib.util import find_spec

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from rest_framework_api_key.models import APIKey

from partner_api.keys import api_key_replace
from partner_api.models import KeyScope

DEMO_KEY_NAME = "demo"
DEMO_SHOP_KEY_NAME = "demo-shop"


def demo_seeds():
    """The `seed` of every installed app's own `demo` module, in the order of INSTALLED_APPS.

    Each app keeps its demo data beside its code (sync/demo.py, orders/demo.py, ...): a
    `seed()` that loads it once and returns the lines to show.
    """
    for app in apps.get_app_configs():
        if find_spec(f"{app.name}.demo") is not None:
            yield import_module(f"{app.name}.demo").seed


class Command(BaseCommand):
    help = (
        "Prepare a local demo: migrate the database, load demo data once and print a new "
        "partner key and a new shop key (replacing the previous demo keys) with a ready curl "
        "line. Creates an admin user with a random password when "
        "there is no superuser yet."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--port",
            type=int,
            default=None,
            help=(
                "Port the service will use (default 8000). When given, the command first "
                "checks that nothing listens on 127.0.0.1:PORT and stops, changing nothing "
                "(the demo keys stay valid), when something does."
            ),
        )

    def handle(self, *args, port: int | None, **options):
        if port is not None:
            _port_free_or_stop(port)
        port = 8000 if port is None else port
        call_command("migrate", interactive=False, verbosity=0)
        for seed in demo_seeds():
            for line in seed():
                self.stdout.write(line)
        # One demo key: each run replaces the previous one (keys are stored hashed, so the
        # old value cannot be shown again). Earlier versions named theirs "demo <time>".
        APIKey.objects.filter(name__startswith="demo ").delete()
        _, key = api_key_replace(name=DEMO_KEY_NAME)
        _, shop_key = api_key_replace(name=DEMO_SHOP_KEY_NAME, scope=KeyScope.SHOP)
        base = f"http://127.0.0.1:{port}"
        # The figure's document time, now: the partner system sends one with every figure.
        posted_at = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        self.stdout.write("")
        self.stdout.write(f"Service: {base}   API docs: {base}/api/docs/   Admin: {base}/admin/")
        self.stdout.write(
            "API keys, shown once: the partner key (the partner system's calls) and the shop "
            "key (/api/v1/shop/...). Paste these lines; the README's examples use them:"
        )
        self.stdout.write(f"  export API_KEY={key}")
        self.stdout.write(f"  export SHOP_KEY={shop_key}")
        self.stdout.write("Try it:")
        self.stdout.write(
            f"  curl -s -w '\\nHTTP %{{http_code}}\\n' -X PUT {base}/api/v1/partner/products/item "
            "-H \"X-API-Key: $API_KEY\" -H 'Content-Type: application/json' "
            """-d '{"stock_code": "PT-205-55-16-W", "ean": "8591234567001", "status": "active", """
            """"shop_quantity": 7, "catalog_price": 89.9, "eshop_price": 84.5, "request_id": "DEMO-1", """
            '"sync_context": {"source_type": "stock_adjustment", '
            f'"posted_at": "{posted_at}"' + "}}'"
        )
        self.stdout.write("")
        password = self._admin_user()
        if password:
            self.stdout.write(f"Admin login (shown once): user admin, password {password}")
        else:
            self.stdout.write("Admin: log in with your existing superuser.")
        self.stdout.write("")

    def _admin_user(self) -> str | None:
        """Create the superuser "admin" with a random password, unless a superuser exists."""
        users = get_user_model()
        if (
            users.objects.filter(is_superuser=True).exists()
            or users.objects.filter(username="admin").exists()
        ):
            return None
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username="admin", email="", password=password)
        return password


def _port_free_or_stop(port: int) -> None:
    """Stop before any change when another server already listens on 127.0.0.1:`port`.

    The check binds the port as runserver will (address reuse on, so a port left in TIME_WAIT
    by a server that just stopped still counts as free).
    """
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    except OSError as exc:
        raise CommandError(
            f"Port {port} on 127.0.0.1 is in use ({exc.strerror}): another server is running "
            f"there. Stop it, or pick another port: make run PORT={port + 1}. "
            "Nothing was changed; the demo keys exported before still work."
        ) from None
    finally:
        probe.close()
