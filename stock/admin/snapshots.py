"""Full snapshots in the back-office: the list, and a page that says what the commit would zero
and why it was held, with the absent levels (a sample, and all of them page by page).

Staff change nothing on the record itself. Two buttons call the service: commit a held
snapshot, only by typing the absent count the page shows (`snapshot_commit(confirm_absent=N)`:
a count that is no longer right is refused and nothing is zeroed), and abandon an open or held
one (`snapshot_abandon`). Both need the permission to change snapshots.
"""

import re
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from core.display import local_time
from stock.admin.shared import ReadOnlyAdmin, changelist_url
from stock.admin.snapshot_review import snapshot_review
from stock.models import StockMovement, StockSnapshot
from stock.snapshots import (
    SAMPLE_SIZE,
    SnapshotHeld,
    SnapshotStateRefused,
    snapshot_abandon,
    snapshot_absent_page,
    snapshot_commit,
    snapshot_find,
)

# The absent levels listed on one page of their own list.
ABSENT_PAGE_SIZE = 100
# What a typed count may be: a whole number, 0 or more (the API takes no larger count either).
_COUNT = re.compile(r"[0-9]{1,10}")
State = StockSnapshot.State


def held_reasons_short(snapshot: StockSnapshot) -> str:
    labels = dict(StockSnapshot.HeldReason.choices)
    return ", ".join(labels.get(code, code) for code in snapshot.held_reasons or []) or "-"


@admin.register(StockSnapshot)
class StockSnapshotAdmin(ReadOnlyAdmin):
    """Full snapshots, newest first: read-only, with the commit of a held one by its absent
    count and the abandonment of an open or held one."""

    change_form_template = "admin/stock/stocksnapshot/change_form.html"
    list_display = (
        "snapshot_id",
        "state",
        "warehouse_code",
        "declared_items",
        "received_items",
        "absent",
        "reasons",
        "opened_at",
        "expires_at",
    )
    list_filter = ("state", "warehouse")
    search_fields = ("snapshot_id",)
    list_select_related = ("warehouse",)
    ordering = ("-opened_at", "-id")
    fields = (
        ("snapshot_id", "state"),
        ("warehouse", "posted_at"),
        ("declared_items", "received_items", "absent"),
        "reasons",
        ("opened_at", "expires_at"),
        ("held_at", "committed_at"),
        ("changed_at", "changed_by"),
        "movements_link",
    )
    readonly_fields = flatten(fields)

    @admin.display(description="ware\u00adhouse", ordering="warehouse__code")
    def warehouse_code(self, obj: StockSnapshot) -> str:
        return obj.warehouse.code

    @admin.display(description="held reasons")
    def reasons(self, obj: StockSnapshot) -> str:
        return held_reasons_short(obj)

    @admin.display(description="Movements")
    def movements_link(self, obj: StockSnapshot) -> str:
        return format_html(
            "<a href=\"{}\">Stock movements of this snapshot</a> (its parts' and its commit's)",
            changelist_url(StockMovement, snapshot__id__exact=obj.pk),
        )

    def may_change(self, request) -> bool:
        """Whether the user may commit or abandon snapshots (the record itself stays
        read-only for everyone)."""
        opts = self.model._meta
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def get_urls(self):
        view = self.admin_site.admin_view
        name = f"{self.model._meta.app_label}_{self.model._meta.model_name}"
        return [
            path(
                "<path:object_id>/commit/",
                view(require_POST(self.commit_view)),
                name=f"{name}_commit",
            ),
            path(
                "<path:object_id>/abandon/",
                view(require_POST(self.abandon_view)),
                name=f"{name}_abandon",
            ),
            path("<path:object_id>/absent/", view(self.absent_view), name=f"{name}_absent"),
            *super().get_urls(),
        ]

    def _snapshot(self, request, object_id) -> StockSnapshot:
        """The snapshot as it is now: one whose time ran out is expired first (as every read
        of the API does)."""
        snapshot = self.get_object(request, unquote(object_id))
        if snapshot is None or not self.has_view_permission(request, snapshot):
            raise Http404("No such snapshot.")
        return snapshot_find(snapshot.snapshot_id) or snapshot

    @staticmethod
    def _page_url(snapshot: StockSnapshot) -> str:
        return reverse("admin:stock_stocksnapshot_change", args=(snapshot.pk,))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        snapshot = self._snapshot(request, object_id)
        review = snapshot_review(snapshot, may_change=self.may_change(request))
        listed = snapshot.state in (State.OPEN, State.HELD) or (
            snapshot.state == State.COMMITTED and snapshot.absent
        )
        sample = snapshot_absent_page(snapshot, after=None, limit=SAMPLE_SIZE) if listed else []
        context = {
            "review": review,
            "snapshot": snapshot,
            "absent_sample": sample,
            "absent_total": review.absent_now
            if review.absent_now is not None
            else (snapshot.absent or 0),
            "absent_url": reverse("admin:stock_stocksnapshot_absent", args=(snapshot.pk,)),
            "commit_url": reverse("admin:stock_stocksnapshot_commit", args=(snapshot.pk,)),
            "abandon_url": reverse("admin:stock_stocksnapshot_abandon", args=(snapshot.pk,)),
            "committed": snapshot.state == State.COMMITTED,
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra_context=context)

    def commit_view(self, request, object_id):
        if not self.may_change(request):
            raise PermissionDenied
        snapshot = self._snapshot(request, object_id)
        typed = request.POST.get("confirm_absent", "").strip()
        if not _COUNT.fullmatch(typed):
            self.message_user(
                request,
                f"Type the number of absent levels the page shows (a whole number), not "
                f"{typed!r}: nothing was committed, nothing was zeroed.",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._page_url(snapshot))
        if snapshot.state != State.HELD:
            self.message_user(
                request,
                f"Snapshot {snapshot.snapshot_id} is {snapshot.state}: only a held snapshot is "
                "committed here. Nothing was zeroed.",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._page_url(snapshot))
        typed_count = int(typed)
        try:
            result = snapshot_commit(
                snapshot.snapshot_id, confirm_absent=typed_count, by=request.user.get_username()
            )
        except SnapshotStateRefused as refused:
            self.message_user(
                request,
                f"Snapshot {snapshot.snapshot_id} is {refused.snapshot.state}: it can no "
                "longer be committed. Nothing was zeroed.",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._page_url(snapshot))
        if isinstance(result, SnapshotHeld):
            self.message_user(
                request,
                f"Not committed: you typed {typed_count}, but {result.absent} levels are "
                f"absent now. Nothing was zeroed. Review the absent levels again; to set them "
                f"to 0, type {result.absent}.",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._page_url(snapshot))
        committed = result.snapshot
        self.log_change(
            request,
            committed,
            f"Committed by confirming {typed_count} absent levels; {committed.absent} set to 0.",
        )
        self.message_user(
            request,
            f"Snapshot {committed.snapshot_id} committed: {committed.absent} levels of "
            f"{committed.warehouse.code} set to 0.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(self._page_url(committed))

    def abandon_view(self, request, object_id):
        if not self.may_change(request):
            raise PermissionDenied
        snapshot = self._snapshot(request, object_id)
        if snapshot.state not in (State.OPEN, State.HELD):
            self.message_user(
                request,
                f"Snapshot {snapshot.snapshot_id} is {snapshot.state}: only an open or held "
                "snapshot is abandoned.",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._page_url(snapshot))
        try:
            abandoned = snapshot_abandon(snapshot.snapshot_id, by=request.user.get_username())
        except SnapshotStateRefused as refused:
            self.message_user(
                request,
                f"Snapshot {snapshot.snapshot_id} is {refused.snapshot.state}: it can no "
                "longer be abandoned.",
                messages.ERROR,
            )
            return HttpResponseRedirect(self._page_url(snapshot))
        self.log_change(request, abandoned, "Abandoned: nothing zeroed.")
        self.message_user(
            request,
            f"Snapshot {abandoned.snapshot_id} abandoned: nothing was zeroed, its parts stay "
            "applied.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(self._page_url(abandoned))

    def absent_view(self, request, object_id):
        """The absent levels (a committed snapshot's: those it zeroed), a page at a time after
        the last one shown (stock code, then EAN)."""
        snapshot = self._snapshot(request, object_id)
        code, ean = request.GET.get("after_code"), request.GET.get("after_ean", "")
        after = (code, ean) if code is not None else None
        rows = snapshot_absent_page(snapshot, after=after, limit=ABSENT_PAGE_SIZE + 1)
        more = len(rows) > ABSENT_PAGE_SIZE
        rows = rows[:ABSENT_PAGE_SIZE]
        last = rows[-1] if rows else None
        next_url = (
            f"?{urlencode({'after_code': last['stock_code'], 'after_ean': last['ean'] or ''})}"
            if more and last
            else None
        )
        products_url = reverse("admin:catalog_product_changelist")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Absent levels of snapshot {snapshot.snapshot_id}",
            "subtitle": None,
            "snapshot": snapshot,
            "page_url": self._page_url(snapshot),
            "committed": snapshot.state == State.COMMITTED,
            "rows": [
                {**row, "url": f"{products_url}?{urlencode({'q': row['stock_code']})}"}
                for row in rows
            ],
            "first_page": after is None,
            "next_url": next_url,
            "posted_at": local_time(snapshot.posted_at),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/stock/stocksnapshot/absent.html", context)
