"""The synchronization dashboard shown on the admin index (templates/admin/index.html)."""

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.http import urlencode

from catalog.models import PendingProduct, SyncAudit
from monitoring.selectors import REFUSED_WINDOW, open_reservations_figures, sync_dashboard_figures
from orders.states import PartnerStatus
from stock.models import Reservation

register = template.Library()


def _url(name: str, **filters: str) -> str | None:
    try:
        url = reverse(name)
    except NoReverseMatch:
        # A figure whose admin page is missing is shown without a link.
        return None
    return f"{url}?{urlencode(filters)}" if filters else url


@register.simple_tag(takes_context=True)
def sync_dashboard(context) -> dict | None:
    """The dashboard's figures and links, or None for staff who may not see sync audits."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.has_perm("catalog.view_syncaudit"):
        return None
    now = timezone.now()
    # Aware, as the admin's own date filter writes it, so no naive-datetime warning.
    since = str((now - REFUSED_WINDOW).replace(microsecond=0))
    return {
        "figures": sync_dashboard_figures(now=now),
        "reservations": open_reservations_figures(),
        "can_switch": user.has_perm("catalog.change_synccontrol"),
        "switch_url": reverse("admin:catalog_synccontrol_switch"),
        "pending_url": _url(
            "admin:catalog_pendingproduct_changelist", state__exact=PendingProduct.State.OPEN
        ),
        "orders_url": _url(
            "admin:orders_order_changelist",
            partner_sync_status__exact=PartnerStatus.PENDING_PARTNER.value,
        ),
        "audits_url": _url(
            "admin:catalog_syncaudit_changelist", outcome__exact=SyncAudit.Outcome.APPLIED
        ),
        # Oldest first (the list's created_at column).
        "reservations_url": _url(
            "admin:stock_reservation_changelist", state__exact=Reservation.State.OPEN, o="1"
        ),
        "refused_url": _url(
            "admin:catalog_syncaudit_changelist",
            outcome__exact=SyncAudit.Outcome.REFUSED,
            created_at__gte=since,
        ),
    }
