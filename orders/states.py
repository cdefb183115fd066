"""An order's states and the moves between them, declared once.

Two axes, as the interface has them:

- `partner_sync_status`: whether the partner system has the order (`pending_partner`) or has
  registered it (`acknowledged`); null for orders that are not the partner's (legacy imports,
  orders the shop cancelled before the partner system registered them).
- `status`: what became of the order (`new`, `partially_shipped`, `shipped`, `delivered`,
  `cancelled`). An imported order may carry a status of its own ("processing", ...): for the
  moves below it counts as `new`.

Who moves an order (`Actor`): the shop (placement, cancellation before acknowledgement), the
partner system (acknowledgement, what became of the order) or staff (admin actions).

Everything that names a state reads it from here: the model's choices, the API schemas, the
selectors, the services, the admin, the metrics and the connector. Adding a status is a change
to `OrderStatus` and `STATUS_TRANSITIONS` (and a migration for the choices).
"""

from __future__ import annotations

from django.db import models


class OrderStatus(models.TextChoices):
    """What became of the order: `new` (placed or imported, not shipped yet),
    `partially_shipped` (some of its units left in a shipment, others wait), `shipped` (handed to
    a carrier), `delivered` (the customer has it) or `cancelled` (its open reservations go back
    on sale)."""

    NEW = "new", "New"
    PARTIALLY_SHIPPED = "partially_shipped", "Partially shipped"
    SHIPPED = "shipped", "Shipped"
    DELIVERED = "delivered", "Delivered"
    CANCELLED = "cancelled", "Cancelled"


class PartnerStatus(models.TextChoices):
    """Whether the partner system still has to fetch the order (`pending_partner`) or has
    registered it under its document number (`acknowledged`)."""

    PENDING_PARTNER = "pending_partner", "Pending partner"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"


class Actor(models.TextChoices):
    """Who moved an order, as its history shows it: the shop, the partner system or staff."""

    SHOP = "shop", "Shop"
    PARTNER = "partner", "Partner system"
    STAFF = "staff", "Staff"


class OrderSource(models.TextChoices):
    """How the order came to the service: loaded by `import_orders` or placed by the shop."""

    IMPORT = "import", "Imported"
    SHOP = "shop", "Placed by the shop"


class MovedBy(models.TextChoices):
    """What moves an acknowledged order along the table: a status report (the partner system's
    status operation, or staff in the admin), or its shipments (the units that left)."""

    REPORT = "report", "Status report"
    SHIPMENTS = "shipments", "Shipments"


_REPORT = frozenset({MovedBy.REPORT})
_SHIPMENTS = frozenset({MovedBy.SHIPMENTS})
_EITHER = _REPORT | _SHIPMENTS

# From each status, the statuses an acknowledged order may move to, and what may move it there.
# A status not listed here (an imported order's own) counts as `new`. Shipments move an order
# by what has left: part of its units (`partially_shipped`), every unit (`shipped`), every
# parcel delivered (`delivered`); a status report cannot split an order, so a partially shipped
# one moves on only by its shipments.
STATUS_TRANSITIONS: dict[str, dict[str, frozenset[str]]] = {
    OrderStatus.NEW: {
        OrderStatus.PARTIALLY_SHIPPED: _SHIPMENTS,
        OrderStatus.SHIPPED: _EITHER,
        OrderStatus.CANCELLED: _REPORT,
    },
    OrderStatus.PARTIALLY_SHIPPED: {OrderStatus.SHIPPED: _SHIPMENTS},
    OrderStatus.SHIPPED: {OrderStatus.DELIVERED: _EITHER},
    OrderStatus.DELIVERED: {},
    OrderStatus.CANCELLED: {},
}
# The statuses the partner system reports (the status operation's `status` values).
PARTNER_REPORTED_STATUSES: tuple[str, ...] = tuple(
    sorted(
        {
            target
            for targets in STATUS_TRANSITIONS.values()
            for target, movers in targets.items()
            if MovedBy.REPORT in movers
        }
    )
)
# The statuses of an order that has left the warehouse: the partner system's figures count it.
LEFT_THE_WAREHOUSE_STATUSES: frozenset[str] = frozenset(
    {OrderStatus.SHIPPED, OrderStatus.DELIVERED}
)
# The statuses after which nothing moves.
FINAL_STATUSES: frozenset[str] = frozenset(
    status for status, targets in STATUS_TRANSITIONS.items() if not targets
)

# The poll's filter: one partner sync status, or every order the partner system has.
PARTNER_STATUS_ALL = "all"
PARTNER_STATUS_FILTERS: tuple[str, ...] = (*PartnerStatus.values, PARTNER_STATUS_ALL)


def effective_status(status: str) -> str:
    """The status an order counts as in the transition table (`new` for an unknown one)."""
    return status if status in STATUS_TRANSITIONS else OrderStatus.NEW


def status_change_allowed(current: str, target: str, *, by: str = MovedBy.REPORT) -> bool:
    """Whether `by` (a status report, or the order's shipments) may move an order from
    `current` to `target`."""
    return by in STATUS_TRANSITIONS[effective_status(current)].get(target, frozenset())


def reported_targets(current: str) -> list[str]:
    """The statuses a status report may move an order in `current` to, sorted."""
    return sorted(
        target
        for target, movers in STATUS_TRANSITIONS[effective_status(current)].items()
        if MovedBy.REPORT in movers
    )


def partner_statuses_for(filter_value: str) -> list[str]:
    """The partner sync statuses a poll filter value stands for."""
    if filter_value == PARTNER_STATUS_ALL:
        return list(PartnerStatus.values)
    return [PartnerStatus(filter_value).value]


def shop_may_cancel(*, source: str, partner_sync_status: str | None, status: str) -> bool:
    """The shop cancels its own orders until the partner system acknowledges them."""
    return (
        source == OrderSource.SHOP
        and partner_sync_status == PartnerStatus.PENDING_PARTNER
        and effective_status(status) == OrderStatus.NEW
    )
