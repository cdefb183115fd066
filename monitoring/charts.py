"""The dashboard's chart of the last 24 hours as inline SVG geometry, computed on the server:
no JavaScript and no charting library, so it works offline and in any browser."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from monitoring.selectors import HourActivity

WIDTH = 600
LEFT = 40
RIGHT = 12
PLOT = WIDTH - LEFT - RIGHT
BAR_SHARE = 0.72
# (top, height) of the three panels: sync calls, items updated, orders waiting.
SYNCS = (28, 110)
ITEMS = (172, 64)
ORDERS = (270, 64)
HEIGHT = ORDERS[0] + ORDERS[1] + 30
SERIES = (("accepted", "Accepted"), ("paused", "Paused"), ("refused", "Refused"))


@dataclass
class Rect:
    x: float
    y: float
    width: float
    height: float
    kind: str = ""


@dataclass
class Hour:
    title: str
    slot: Rect
    bars: list[Rect] = field(default_factory=list)


@dataclass
class Panel:
    title: str
    top: float
    bottom: float
    top_label: str


@dataclass
class Chart:
    width: int
    height: int
    left: int
    hours: list[Hour]
    panels: list[Panel]
    orders_line: str
    orders_points: list[tuple[float, float]]
    ticks: list[tuple[float, str]]
    legend: list[tuple[float, str, str]]
    summary: str


def nice_ceiling(value: float) -> int:
    """The smallest of 1, 2 or 5 times a power of ten that is at least `value` (at least 1)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return int(step * power)
    raise AssertionError("unreachable")


def _r(value: float) -> float:
    return round(value, 1)


def activity_chart(hours: list[HourActivity]) -> Chart:
    slot = PLOT / len(hours)
    bar = slot * BAR_SHARE
    syncs_max = nice_ceiling(max((h.accepted + h.paused + h.refused for h in hours), default=0))
    items_max = nice_ceiling(max((h.items_updated for h in hours), default=0))
    orders_max = nice_ceiling(max((h.orders_waiting for h in hours), default=0))
    drawn: list[Hour] = []
    points: list[tuple[float, float]] = []
    ticks: list[tuple[float, str]] = []
    for index, hour in enumerate(hours):
        x = LEFT + index * slot
        bar_x = x + (slot - bar) / 2
        local = timezone.localtime(hour.start)
        until = timezone.localtime(hour.start + timedelta(hours=1))
        title = (
            f"{local:%H:%M}–{until:%H:%M}: "
            f"{hour.accepted} accepted, {hour.paused} paused, {hour.refused} refused, "
            f"{hour.items_updated} items updated, {hour.orders_waiting} orders waiting"
        )
        entry = Hour(
            title=title, slot=Rect(_r(x), SYNCS[0], _r(slot), ORDERS[0] + ORDERS[1] - SYNCS[0])
        )
        baseline = SYNCS[0] + SYNCS[1]
        for kind, _ in SERIES:
            count = getattr(hour, kind)
            if count:
                height = SYNCS[1] * count / syncs_max
                baseline -= height
                entry.bars.append(Rect(_r(bar_x), _r(baseline), _r(bar), _r(height), kind))
        if hour.items_updated:
            height = ITEMS[1] * hour.items_updated / items_max
            entry.bars.append(
                Rect(_r(bar_x), _r(ITEMS[0] + ITEMS[1] - height), _r(bar), _r(height), "items")
            )
        drawn.append(entry)
        points.append(
            (
                _r(x + slot / 2),
                _r(ORDERS[0] + ORDERS[1] - ORDERS[1] * hour.orders_waiting / orders_max),
            )
        )
        if index % 3 == 0:
            ticks.append((_r(x + slot / 2), f"{local:%H:%M}"))
    panels = [
        Panel("Sync calls per hour", SYNCS[0], SYNCS[0] + SYNCS[1], str(syncs_max)),
        Panel("Items updated per hour", ITEMS[0], ITEMS[0] + ITEMS[1], str(items_max)),
        Panel("Orders waiting for the partner", ORDERS[0], ORDERS[0] + ORDERS[1], str(orders_max)),
    ]
    legend = [(LEFT + 170 + n * 80, kind, label) for n, (kind, label) in enumerate(SERIES)]
    totals = {kind: sum(getattr(h, kind) for h in hours) for kind, _ in SERIES}
    summary = (
        f"Last 24 hours: {totals['accepted']} accepted, {totals['paused']} paused and "
        f"{totals['refused']} refused sync calls, "
        f"{sum(h.items_updated for h in hours)} items updated; "
        f"{hours[-1].orders_waiting if hours else 0} orders waiting now."
    )
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        hours=drawn,
        panels=panels,
        orders_line=" ".join(f"{x},{y}" for x, y in points),
        orders_points=points,
        ticks=ticks,
        legend=legend,
        summary=summary,
    )
