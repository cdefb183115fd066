import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from psycopg import sql

# The database every PostgreSQL server has, to connect to while ours does not exist yet.
MAINTENANCE_DATABASE = "postgres"


class Command(BaseCommand):
    help = (
        "Create the PostgreSQL database named in DATABASE_URL unless it exists (then run "
        "migrate). On SQLite there is nothing to do: migrate creates the file."
    )

    def handle(self, *args, **options):
        database = settings.DATABASES["default"]
        if not database["ENGINE"].endswith("postgresql"):
            self.stdout.write("SQLite: migrate creates the database file; nothing to do.")
            return
        name = database["NAME"]
        if not name:
            raise CommandError("DATABASE_URL names no database (postgres://user@host:5432/NAME).")
        try:
            with psycopg.connect(
                dbname=MAINTENANCE_DATABASE,
                host=database.get("HOST") or None,
                port=database.get("PORT") or None,
                user=database.get("USER") or None,
                password=database.get("PASSWORD") or None,
                connect_timeout=database["OPTIONS"].get("connect_timeout", 5),
                autocommit=True,
            ) as connection:
                exists = connection.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
                ).fetchone()
                if exists:
                    self.stdout.write(f"Database {name} exists.")
                    return
                connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as exc:
            raise CommandError(f"Could not create database {name}: {exc}".strip()) from exc
        self.stdout.write(f"Created database {name}.")
