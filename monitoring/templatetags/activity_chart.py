"""The dashboard's chart of the last 24 hours (templates/admin/index.html)."""

from django import template

from monitoring.charts import activity_chart
from monitoring.selectors import sync_activity_by_hour

register = template.Library()


@register.inclusion_tag("monitoring/activity_chart.html", takes_context=True)
def sync_activity_chart(context) -> dict:
    """The chart, for staff who may see sync audits; nothing for others."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.has_perm("catalog.view_syncaudit"):
        return {"chart": None}
    return {"chart": activity_chart(sync_activity_by_hour())}
