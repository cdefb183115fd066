"""Stock: where units are held (warehouses), how many (a level per product and warehouse), the
units shop orders hold back (reservations) and why every figure moved (movements).

Written only by the stock app's writers, which the package's docstring lists.
`Product.shop_quantity` and `Product.reserved` are the sums of the selling warehouses' levels,
kept by the same writers in the same transaction.
"""

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from catalog.models import REQUEST_ID_MAX_LENGTH, Product, SyncAudit
from core.indexes import AppendOrderIndex

WAREHOUSE_CODE_MAX_LENGTH = 32
WAREHOUSE_CODE_PATTERN = r"^[A-Za-z0-9._-]{1,32}\Z"
WAREHOUSE_CODE_HELP = "1 to 32 characters of A-Z a-z 0-9 . _ - (case-sensitive)."


class Warehouse(models.Model):
    """A place that holds stock: the central store, a branch, a supplier's drop-ship stock."""

    code = models.CharField(
        max_length=WAREHOUSE_CODE_MAX_LENGTH,
        unique=True,
        validators=[RegexValidator(WAREHOUSE_CODE_PATTERN, WAREHOUSE_CODE_HELP)],
        help_text=WAREHOUSE_CODE_HELP,
    )
    name = models.CharField(max_length=255)
    sells = models.BooleanField(
        default=True, help_text="Whether its stock counts towards what the shop can sell."
    )
    priority = models.IntegerField(default=100, help_text="Lower is taken first.")
    lead_time_days = models.PositiveIntegerField(
        default=0, validators=[MinValueValidator(0)], verbose_name="lead time (days)"
    )

    class Meta:
        ordering = ("priority", "code")

    def __str__(self) -> str:
        return self.code if self.name == self.code else f"{self.code} ({self.name})"


def taking_order(priority: int, code: str) -> tuple[int, str]:
    """Where a warehouse stands in the order units are taken in: by priority, then by code
    compared character by character (code points: Python's comparison of text, never a
    database's collation, which may put "a" before "B")."""
    return (priority, code)


class StockLevel(models.Model):
    """A product's stock in one warehouse: the partner system's absolute figure there, the
    units of open reservations pinned there, and the document time of the last level applied."""

    # Indexed by the key (product, warehouse), which leads with the product.
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="levels", db_index=False
    )
    warehouse = models.ForeignKey(Warehouse, on_delete=models.PROTECT, related_name="levels")
    quantity = models.IntegerField(default=0)
    reserved = models.IntegerField(default=0)
    posted_at = models.DateTimeField(null=True, blank=True, verbose_name="document posted at")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("product", "warehouse")
        constraints = (
            models.UniqueConstraint(fields=("product", "warehouse"), name="stock_level_key"),
        )

    def __str__(self) -> str:
        return f"{self.product} @ {self.warehouse.code}: {self.quantity}"

    @property
    def salable(self) -> int:
        return max(0, self.quantity - self.reserved)


class Reservation(models.Model):
    """Units of a product that a shop order holds back from sale, pinned to a warehouse.

    Open from the placement until the partner system's figures include the order (consumed,
    by the first sync that applies the product's level in its warehouse with a document time at
    or after the order's `stock_booked_at`) or the order is cancelled (released). Each change keeps its time
    and cause, so staff can tell why the shop shows what it shows.
    """

    class State(models.TextChoices):
        OPEN = "open", "Open"
        CONSUMED = "consumed", "Consumed"
        RELEASED = "released", "Released"

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="reservations")
    # Indexed for the open reservations only (below): a consumed or released one is looked up
    # by warehouse only when staff delete the warehouse, and every index of this table takes a
    # new entry each time a reservation changes state.
    warehouse = models.ForeignKey(
        Warehouse, on_delete=models.PROTECT, related_name="reservations", db_index=False
    )
    # Protected: deleting an order must not silently change what the shop can sell.
    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="reservations")
    # The order line whose units it holds: a line's units may come from several warehouses,
    # one reservation each (its allocations). Null only for reservations made without a line.
    item = models.ForeignKey(
        "orders.OrderItem",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reservations",
        verbose_name="order line",
    )
    quantity = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    # From when the partner system's figures count the order (its acknowledgement's
    # stock_booked_at); null until the order is acknowledged.
    booked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The last change of state (or of booked_at), and what made it.
    changed_at = models.DateTimeField(default=timezone.now)
    cause = models.CharField(max_length=255, blank=True, default="")
    # The sync call that consumed it. No database-level foreign key, as for the history: a
    # batch consumes up to thousands of reservations, and PostgreSQL checks a deferred foreign
    # key one row at a time at commit (8 ms for 1000). Django still sets it to null when a
    # purge deletes the audit row, and the column stays indexed.
    sync_audit = models.ForeignKey(
        SyncAudit,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )

    class Meta:
        db_table = "catalog_reservation"
        ordering = ("-created_at", "-id")
        indexes = (
            # The sync's question: the open, booked reservations of these products.
            models.Index(
                fields=("product", "booked_at"),
                name="catalog_reservation_open",
                condition=models.Q(state="open"),
            ),
            # What each warehouse's open reservations hold (the metrics, the dashboard).
            models.Index(
                fields=("warehouse",),
                name="catalog_reservation_open_in",
                condition=models.Q(state="open"),
            ),
        )

    def __str__(self) -> str:
        return f"{self.quantity} × {self.product} ({self.state})"


class StockMovement(models.Model):
    """Why a figure moved: a level's quantity, or the units reserved in a warehouse."""

    class Kind(models.TextChoices):
        QUANTITY = "quantity", "Quantity"
        RESERVED = "reserved", "Reserved"

    class Reason(models.TextChoices):
        SYNC = "sync", "Sync"
        IMPORT = "import", "Import"
        PENDING_KEY_RESOLVED = "pending_key_resolved", "Pending key resolved"
        STAFF_EDIT = "staff_edit", "Staff edit"
        PLACEMENT = "placement", "Placement"
        SHOP_CANCELLATION = "shop_cancellation", "Shop cancellation"
        PARTNER_CANCELLATION = "partner_cancellation", "Partner cancellation"
        CONSUMPTION = "consumption", "Consumption"
        UNBOOKING = "unbooking", "Unbooking"
        SNAPSHOT_ABSENT = "snapshot_absent", "Snapshot: absent"

    # No database-level foreign keys, as for the history: a sync writes thousands at once.
    # Indexed by product with the time (the product page's question), by time (the list of all
    # movements, newest first) and by sync call (block ranges, see Meta); a movement is never
    # looked up by its warehouse or order alone.
    product = models.ForeignKey(
        Product,
        on_delete=models.CASCADE,
        related_name="movements",
        db_constraint=False,
        db_index=False,
    )
    warehouse = models.ForeignKey(
        Warehouse,
        on_delete=models.PROTECT,
        related_name="movements",
        db_constraint=False,
        db_index=False,
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, verbose_name="what moved")
    before = models.IntegerField(null=True, blank=True)
    after = models.IntegerField()
    reason = models.CharField(max_length=32, choices=Reason.choices)
    # The source: the sync call (its audit row, request_id and document time), the order, or
    # the staff user.
    sync_audit = models.ForeignKey(
        SyncAudit,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    request_id = models.CharField(
        max_length=REQUEST_ID_MAX_LENGTH, null=True, blank=True, verbose_name="request ID"
    )
    posted_at = models.DateTimeField(null=True, blank=True, verbose_name="document posted at")
    order = models.ForeignKey(
        "orders.Order",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    order_number = models.CharField(max_length=128, blank=True, default="")
    staff_user = models.CharField(max_length=150, blank=True, default="")
    # The full snapshot whose part or commit moved the figure (`StockSnapshot`), if any.
    snapshot = models.ForeignKey(
        "stock.StockSnapshot",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (
            models.Index(fields=("product", "-created_at"), name="stock_movement_product"),
            # The levels a committed snapshot zeroed (its absent listing). Only its commit's
            # movements: a part's (reason sync) are the sync's, found by their audit row, and
            # would cost every part an index entry per movement.
            models.Index(
                fields=("snapshot", "product"),
                name="stock_movement_snapshot",
                condition=models.Q(snapshot__isnull=False, reason="snapshot_absent"),
            ),
            # A sync writes up to thousands at once, all of one call: the block ranges that hold
            # a call's movements are what its audit's page and the audit's purge look up.
            AppendOrderIndex(fields=("sync_audit",), name="stock_movement_sync_audit"),
        )

    def __str__(self) -> str:
        return f"{self.product_id}@{self.warehouse_id} {self.kind} {self.before}→{self.after}"


SNAPSHOT_ID_MAX_LENGTH = 64
SNAPSHOT_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,64}\Z"


class StockSnapshot(models.Model):
    """A full snapshot: the partner system's whole stock of one warehouse as of one document
    time, sent in parts; its commit sets to 0 the levels it did not name (the absent ones),
    unless the guard holds it for a person to confirm the absent count."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        HELD = "held", "Held"
        COMMITTED = "committed", "Committed"
        EXPIRED = "expired", "Expired"
        ABANDONED = "abandoned", "Abandoned"

    class HeldReason(models.TextChoices):
        COUNT_MISMATCH = "count_mismatch", "Count mismatch"
        TOO_MANY_ABSENT = "too_many_absent", "Too many absent"
        SHRUNK = "shrunk", "Shrunk"

    # The partner system's own id for this count, unique across the service.
    snapshot_id = models.CharField(
        max_length=SNAPSHOT_ID_MAX_LENGTH, unique=True, verbose_name="snapshot ID"
    )
    warehouse = models.ForeignKey(Warehouse, on_delete=models.PROTECT, related_name="snapshots")
    posted_at = models.DateTimeField(verbose_name="document posted at")
    declared_items = models.PositiveIntegerField()
    received_items = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    opened_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    committed_at = models.DateTimeField(null=True, blank=True)
    # Held: how many levels the commit would zero; committed: how many it zeroed.
    absent = models.PositiveIntegerField(null=True, blank=True)
    # Held: why (in the contract's order); committed: what a confirmation overrode.
    held_reasons = models.JSONField(default=list, blank=True)
    # Since when it is held (the alert's clock); null unless held.
    held_at = models.DateTimeField(null=True, blank=True)
    # The last change of state, and who made it (the API key's name or the staff user).
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ("-opened_at", "-id")
        indexes = (
            # The guard's `shrunk`: the last committed snapshot of a warehouse.
            models.Index(
                fields=("warehouse", "-committed_at"),
                name="stock_snapshot_committed",
                condition=models.Q(state="committed"),
            ),
            # Expiry and the alert: the snapshots still open or held.
            models.Index(
                fields=("expires_at",),
                name="stock_snapshot_open",
                condition=models.Q(state__in=("open", "held")),
            ),
        )

    def __str__(self) -> str:
        return f"{self.snapshot_id} ({self.state})"
