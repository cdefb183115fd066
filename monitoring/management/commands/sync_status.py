import json
from datetime import datetime, timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from monitoring.selectors import sync_dashboard_figures


def age(then: datetime, now: datetime) -> str:
    """A short, human age: "45 s", "12 min", "3 h 5 min", "2 d 4 h"."""
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def stamp(value: datetime) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M %Z")


class Command(BaseCommand):
    help = (
        "Show the sync dashboard's figures: open pending keys, orders waiting for the partner "
        "system, the last accepted sync, refused syncs in the last 24 hours, the pause switch."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json",
            dest="as_json",
            action="store_true",
            help="Print the figures as one JSON object.",
        )

    def handle(self, *args, as_json: bool, **options):
        now = timezone.now()
        figures = sync_dashboard_figures(now=now)
        if as_json:
            self.stdout.write(_as_json(figures, now))
            return
        if figures.orders_waiting and figures.oldest_waiting_at:
            orders = (
                f"{figures.orders_waiting} (oldest {age(figures.oldest_waiting_at, now)} ago, "
                f"{stamp(figures.oldest_waiting_at)})"
            )
        else:
            orders = str(figures.orders_waiting)
        if figures.last_accepted_sync_at:
            last = (
                f"{age(figures.last_accepted_sync_at, now)} ago "
                f"({stamp(figures.last_accepted_sync_at)})"
            )
        else:
            last = "never"
        if figures.paused:
            switch = f"PAUSED by {figures.paused_by or 'unknown'}"
            if figures.paused_at:
                switch += f" since {stamp(figures.paused_at)}"
            if figures.pause_reason:
                switch += f" ({figures.pause_reason})"
        else:
            switch = "running"
        rows = (
            ("Pending keys open", str(figures.pending_open)),
            ("Orders waiting for the partner", orders),
            ("Last accepted sync", last),
            ("Refused syncs, last 24 h", str(figures.refused_last_24h)),
            ("Synchronization", switch),
        )
        width = max(len(label) for label, _ in rows) + 2
        for label, value in rows:
            self.stdout.write(f"{label + ':':<{width}}{value}")


def _as_json(figures, now: datetime) -> str:
    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    def seconds_since(value: datetime | None) -> int | None:
        return int((now - value) / timedelta(seconds=1)) if value else None

    return json.dumps(
        {
            "pending_open": figures.pending_open,
            "orders_waiting": figures.orders_waiting,
            "oldest_waiting_at": when(figures.oldest_waiting_at),
            "oldest_waiting_age_seconds": seconds_since(figures.oldest_waiting_at),
            "last_accepted_sync_at": when(figures.last_accepted_sync_at),
            "last_accepted_sync_age_seconds": seconds_since(figures.last_accepted_sync_at),
            "refused_last_24h": figures.refused_last_24h,
            "paused": figures.paused,
            "paused_by": figures.paused_by,
            "paused_at": when(figures.paused_at),
            "pause_reason": figures.pause_reason,
        }
    )
