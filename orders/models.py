from django.db import models
from django.utils import timezone

from orders.states import LEFT_THE_WAREHOUSE_STATUSES, Actor, OrderSource, PartnerStatus

ORDER_NUMBER_MAX_LENGTH = 64
ORDER_STATUS_MAX_LENGTH = 32
PARTNER_REFERENCE_MAX_LENGTH = 64
NAME_MAX_LENGTH = 255
EMAIL_MAX_LENGTH = 254
TEXT_MAX_LENGTH = 128
ADDRESS_MAX_LENGTH = 255
STOCK_CODE_MAX_LENGTH = 64
EAN_MAX_LENGTH = 32
CURRENCY_MAX_LENGTH = 3
DEFAULT_CURRENCY = "EUR"
MONEY_MAX_DIGITS = 14
MONEY_DECIMAL_PLACES = 4
CARRIER_MAX_LENGTH = 64
TRACKING_NUMBER_MAX_LENGTH = 128
TRACKING_URL_MAX_LENGTH = 500
CANCEL_REASON_MAX_LENGTH = 255


def _money(**kwargs) -> models.DecimalField:
    return models.DecimalField(
        max_digits=MONEY_MAX_DIGITS, decimal_places=MONEY_DECIMAL_PLACES, **kwargs
    )


class Order(models.Model):
    """A shop order; the partner system sees it only while it has a partner sync status."""

    PartnerStatus = PartnerStatus
    Source = OrderSource

    order_number = models.CharField(max_length=ORDER_NUMBER_MAX_LENGTH, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=ORDER_STATUS_MAX_LENGTH)
    customer_name = models.CharField(max_length=NAME_MAX_LENGTH)
    customer_email = models.CharField(max_length=EMAIL_MAX_LENGTH)
    customer_phone = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    customer_ico = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="customer IČO"
    )
    customer_dic = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="customer DIČ"
    )
    customer_address = models.CharField(max_length=ADDRESS_MAX_LENGTH, null=True, blank=True)
    customer_city = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    customer_zip_code = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="customer postal code"
    )
    subtotal = _money()
    vat_total = _money(verbose_name="VAT total")
    total = _money()
    currency = models.CharField(max_length=CURRENCY_MAX_LENGTH, default=DEFAULT_CURRENCY)
    # Null: not the partner's (a legacy import or an order handled elsewhere).
    partner_sync_status = models.CharField(
        max_length=16, choices=PartnerStatus.choices, null=True, blank=True
    )
    partner_reference = models.CharField(
        max_length=PARTNER_REFERENCE_MAX_LENGTH, null=True, blank=True
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    # Who last changed the partner sync status by hand (admin), and when.
    partner_status_changed_by = models.CharField(max_length=150, blank=True, default="")
    partner_status_changed_at = models.DateTimeField(null=True, blank=True)
    # Where the order came from: an import, or the shop's placement through the API (which
    # reserves stock and may be read and cancelled by the shop).
    source = models.CharField(
        max_length=16, choices=OrderSource.choices, default=OrderSource.IMPORT
    )
    # The canonical body of the shop's placement (sha256): its retry is replayed.
    placement_hash = models.CharField(max_length=64, null=True, blank=True, editable=False)
    # From when the partner system's stock figures count the order.
    stock_booked_at = models.DateTimeField(null=True, blank=True)
    cancel_reason = models.CharField(max_length=255, null=True, blank=True)
    # What became of the order, as the partner system (or the shop) last said.
    status_changed_at = models.DateTimeField(null=True, blank=True)
    carrier = models.CharField(max_length=CARRIER_MAX_LENGTH, null=True, blank=True)
    tracking_number = models.CharField(max_length=TRACKING_NUMBER_MAX_LENGTH, null=True, blank=True)
    tracking_url = models.CharField(
        max_length=TRACKING_URL_MAX_LENGTH, null=True, blank=True, verbose_name="tracking URL"
    )

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (
            # The partner's poll: one status (or two), created_at >= since, ordered by
            # (created_at, id).
            models.Index(
                fields=("partner_sync_status", "created_at", "id"), name="orders_partner_poll"
            ),
        )

    def __str__(self) -> str:
        return self.order_number

    @property
    def has_left_the_warehouse(self) -> bool:
        """Shipped or delivered: the partner system's stock figures count the order."""
        return self.status in LEFT_THE_WAREHOUSE_STATUSES


# The customer's fields, as the API and the import name them ("name"), and their columns
# ("customer_name"): read from the model, so a new customer column needs no other list.
CUSTOMER_COLUMNS = tuple(
    field.name for field in Order._meta.concrete_fields if field.name.startswith("customer_")
)
CUSTOMER_FIELDS = tuple(column.removeprefix("customer_") for column in CUSTOMER_COLUMNS)
# The columns of an order that its record (the API's Order shape, without ids) carries.
ORDER_RECORD_COLUMNS = (
    "created_at",
    "status",
    *CUSTOMER_COLUMNS,
    "subtotal",
    "vat_total",
    "total",
    "currency",
    "partner_sync_status",
    "partner_reference",
)
# What the record adds for what became of the order (not part of an import).
ORDER_FULFILMENT_COLUMNS = ("status_changed_at", "carrier", "tracking_number", "tracking_url")


class OrderItem(models.Model):
    """One line of an order; the partner system identifies the product by ean + stock_code."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="items")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    quantity = models.IntegerField()
    unit_price = _money()
    total = _money()
    ean = models.CharField(max_length=EAN_MAX_LENGTH, null=True, blank=True, verbose_name="EAN")
    stock_code = models.CharField(max_length=STOCK_CODE_MAX_LENGTH, null=True, blank=True)

    class Meta:
        ordering = ("order", "id")
        verbose_name = "order item"

    def __str__(self) -> str:
        return f"{self.quantity} × {self.name}"


class OrderStatusChange(models.Model):
    """One change of an order's status or partner sync status: who, when, from what to what."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="status_changes")
    field = models.CharField(max_length=32, default="status")
    old_value = models.CharField(max_length=ORDER_STATUS_MAX_LENGTH, null=True, blank=True)
    new_value = models.CharField(max_length=ORDER_STATUS_MAX_LENGTH, null=True, blank=True)
    by = models.CharField(max_length=16, choices=Actor.choices)
    # The key's or the staff user's name.
    by_name = models.CharField(max_length=150, blank=True, default="")
    # When it happened (the partner system's clock when it said), and when it was recorded.
    changed_at = models.DateTimeField(default=timezone.now)
    recorded_at = models.DateTimeField(default=timezone.now)
    detail = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ("order", "recorded_at", "id")
        verbose_name = "order status change"

    def __str__(self) -> str:
        return f"{self.field}: {self.describe()} ({self.by})"

    def describe(self) -> str:
        """The change in words: "placed as new", "new → shipped", "set to pending_partner"."""
        old, new = self.old_value, self.new_value
        if old is None and self.field == "status":
            return f"{'placed' if self.by == Actor.SHOP else 'created'} as {new}"
        if old is None:
            return f"set to {new}"
        if new is None:
            return f"{old}, then cleared"
        return f"{old} → {new}"


SHIPMENT_ID_MAX_LENGTH = 64
WAREHOUSE_CODE_MAX_LENGTH = 32


class Shipment(models.Model):
    """A parcel of an order: which units left (its lines), from where, when, with which
    tracking. The partner system names it (`shipment_id`, unique within the order)."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="shipments")
    # The partner system's own id of the parcel (not this row's primary key).
    shipment_id = models.CharField("shipment ID", max_length=SHIPMENT_ID_MAX_LENGTH)
    # The code of the warehouse it left from, as the partner system said it (checked against
    # the stored warehouses when recorded); null: not said. Text, not a foreign key: the
    # parcel's record stays whatever becomes of the warehouse.
    warehouse = models.CharField(max_length=WAREHOUSE_CODE_MAX_LENGTH, null=True, blank=True)
    shipped_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    carrier = models.CharField(max_length=CARRIER_MAX_LENGTH, null=True, blank=True)
    tracking_number = models.CharField(max_length=TRACKING_NUMBER_MAX_LENGTH, null=True, blank=True)
    tracking_url = models.CharField(
        max_length=TRACKING_URL_MAX_LENGTH, null=True, blank=True, verbose_name="tracking URL"
    )
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("order", "shipped_at", "id")
        constraints = (
            models.UniqueConstraint(
                fields=("order", "shipment_id"), name="orders_shipment_id_unique_in_order"
            ),
        )

    def __str__(self) -> str:
        return self.shipment_id


class ShipmentLine(models.Model):
    """Units of one order line in a shipment. `line` is the item's index in the Order record's
    `items` (0 for the first), as the partner system names it."""

    shipment = models.ForeignKey(Shipment, on_delete=models.CASCADE, related_name="lines")
    line = models.PositiveIntegerField()
    quantity = models.PositiveIntegerField()

    class Meta:
        ordering = ("shipment", "line")
        verbose_name = "shipment line"
        constraints = (
            models.UniqueConstraint(fields=("shipment", "line"), name="orders_shipment_line_once"),
        )

    def __str__(self) -> str:
        return f"line {self.line}: {self.quantity}"
