from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

STOCK_CODE_MAX_LENGTH = 64
EAN_MAX_LENGTH = 32
STATUS_MAX_LENGTH = 32
SEASON_MAX_LENGTH = 32
NAME_MAX_LENGTH = 255
TEXT_MAX_LENGTH = 128
REQUEST_ID_MAX_LENGTH = 128
PRICE_MAX_DIGITS = 14
PRICE_DECIMAL_PLACES = 4
WEIGHT_MAX_DIGITS = 10
WEIGHT_DECIMAL_PLACES = 4


class Product(models.Model):
    """A product of the shop, keyed by (ean or "", stock_code) as the partner system knows it."""

    # Indexed by the unique key below, whose first column it is (a lookup by stock_code alone
    # uses it too): a product has two indexes, its id and its key.
    stock_code = models.CharField(max_length=STOCK_CODE_MAX_LENGTH)
    # An absent EAN is stored as "" so that the unique key holds on every database.
    ean = models.CharField(max_length=EAN_MAX_LENGTH, blank=True, default="", verbose_name="EAN")
    status = models.CharField(max_length=STATUS_MAX_LENGTH)
    shop_quantity = models.IntegerField(default=0)
    catalog_price = models.DecimalField(
        max_digits=PRICE_MAX_DIGITS, decimal_places=PRICE_DECIMAL_PLACES
    )
    eshop_price = models.DecimalField(
        max_digits=PRICE_MAX_DIGITS,
        decimal_places=PRICE_DECIMAL_PLACES,
        verbose_name="e-shop price",
    )
    # Catalogue attributes: null means the partner system never sent a value.
    name = models.CharField(max_length=NAME_MAX_LENGTH, null=True, blank=True)
    section_width_mm = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="section width (mm)"
    )
    aspect_ratio = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    rim_inch = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="rim diameter (in)"
    )
    tread_name = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    name_suffix = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    load_index = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    speed_index = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    special_marking = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    run_on_flat = models.BooleanField(null=True, blank=True, verbose_name="run-flat")
    brand = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    usage = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    season = models.CharField(max_length=SEASON_MAX_LENGTH, null=True, blank=True)
    on_promotion = models.BooleanField(null=True, blank=True)
    on_clearance = models.BooleanField(null=True, blank=True)
    dot_code = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="DOT code"
    )
    weight_kg = models.DecimalField(
        max_digits=WEIGHT_MAX_DIGITS,
        decimal_places=WEIGHT_DECIMAL_PLACES,
        null=True,
        blank=True,
        verbose_name="weight (kg)",
    )
    discontinued = models.BooleanField(null=True, blank=True)
    eu_label = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="EU label"
    )
    # When the last stock document applied to the product was posted in the partner system;
    # an older document that arrives later is stale and leaves the product as it is.
    posted_at = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name="document posted at"
    )
    # The sum of the product's open reservations (a cache of them, kept in the same
    # transaction as every change of a reservation; `reservations_recount` rebuilds it).
    reserved = models.IntegerField(default=0, editable=False)
    # Units never offered for sale; null: the setting STOCK_SAFETY_BUFFER.
    safety_buffer = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Units never offered for sale. Empty: the service's default (STOCK_SAFETY_BUFFER).",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ("stock_code", "ean")
        constraints = (
            models.UniqueConstraint(fields=("stock_code", "ean"), name="catalog_product_key"),
        )
        # On PostgreSQL the table keeps room in each page (fillfactor, migration 0007): a sync
        # rewrites every product it names, and with room on the page the new version of the
        # row stays there (a HOT update) and no index is written. A sync never changes an
        # indexed column (id, stock_code, ean).

    def __str__(self) -> str:
        return f"{self.stock_code} / {self.ean}" if self.ean else self.stock_code

    def save(self, *args, **kwargs):
        # `shop_quantity` and `reserved` are the stock's figures, written only by the stock
        # app's writers with the levels they sum: saving a product read a moment ago (an admin
        # edit) must not put back the figures it read while a placement changed them.
        if not self._state.adding and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = _SAVED_FIELDS
        super().save(*args, **kwargs)

    @property
    def effective_safety_buffer(self) -> int:
        return effective_safety_buffer(self.safety_buffer)

    @property
    def salable(self) -> int:
        return salable(self.shop_quantity, self.reserved, self.safety_buffer)


_SAVED_FIELDS = tuple(
    field.name
    for field in Product._meta.concrete_fields
    if not field.primary_key and field.name not in ("shop_quantity", "reserved")
)


def effective_safety_buffer(safety_buffer: int | None) -> int:
    """The product's own buffer, or the service's default when it has none."""
    return settings.STOCK_SAFETY_BUFFER if safety_buffer is None else safety_buffer


def salable(shop_quantity: int, reserved: int, safety_buffer: int | None) -> int:
    """What the shop can sell: the partner's level less open reservations and the buffer."""
    return max(0, shop_quantity - reserved - effective_safety_buffer(safety_buffer))


def _request_id(**options: Any) -> models.CharField:
    """A sync's request_id as the client sent it; null for a call without one."""
    return models.CharField(max_length=REQUEST_ID_MAX_LENGTH, null=True, blank=True, **options)


class PendingProduct(models.Model):
    """A key the partner system sent that matches no product (or more than one)."""

    class Reason(models.TextChoices):
        """Why the key matched no product to update: no product has it (`unknown`), or it has
        no EAN and several products carry its stock_code (`ambiguous`)."""

        UNKNOWN = "unknown", "Unknown key"
        AMBIGUOUS = "ambiguous", "Ambiguous key"

    class State(models.TextChoices):
        """Staff's work on the key: still to do (`open`), answered by a product that a sync,
        a rematch or staff found or created (`resolved`), or closed by staff without a
        product (`dismissed`)."""

        OPEN = "open", "Open"
        RESOLVED = "resolved", "Resolved"
        DISMISSED = "dismissed", "Dismissed"

    stock_code = models.CharField(max_length=STOCK_CODE_MAX_LENGTH, db_index=True)
    ean = models.CharField(max_length=EAN_MAX_LENGTH, blank=True, default="", verbose_name="EAN")
    reason = models.CharField(max_length=16, choices=Reason.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    # The newest item sent for the key, whatever its warehouse: its prices, status and
    # catalogue values are the product's when the key resolves.
    payload = models.JSONField(default=dict, help_text="The last item sent for this key.")
    # The latest document time the key was sent with: an older payload does not replace it.
    posted_at = models.DateTimeField(null=True, blank=True, verbose_name="document posted at")
    # The last item sent for each warehouse, by warehouse code (the default warehouse's for an
    # item that named none): {"payload" (the item's key, warehouse, level and the values every
    # item carries), "posted_at" (document_time_text, or null), "request_id", "seen_at"}. An
    # item replaces its warehouse's unless that one holds a later document time; when the key
    # resolves, each one's quantity is its warehouse's level.
    warehouse_items = models.JSONField(
        default=dict,
        # Also the database's own default: a writer that names no items (one from before this
        # column, still running while the service is upgraded) keeps none instead of failing.
        db_default=models.Value({}, output_field=models.JSONField()),
        blank=True,
        help_text="The last item sent for each warehouse, by code.",
    )
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)
    times_seen = models.PositiveIntegerField(default=1)
    last_request_id = _request_id(verbose_name="last request ID")
    resolved_product = models.ForeignKey(
        Product, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ("-last_seen",)
        constraints = (
            models.UniqueConstraint(fields=("ean", "stock_code"), name="catalog_pending_key"),
        )
        verbose_name = "pending key"
        verbose_name_plural = "pending keys"

    def __str__(self) -> str:
        return f"{self.stock_code} / {self.ean}" if self.ean else self.stock_code

    def kept_items(self) -> list[KeptItem]:
        """The last item sent for each warehouse, by warehouse code (code points). A key
        written without them (by a writer from before warehouses, while the service is
        upgraded) keeps its payload, for the warehouse it names or the default one."""
        items = self.warehouse_items if isinstance(self.warehouse_items, dict) else {}
        if not items and isinstance(self.payload, dict) and self.payload:
            code = self.payload.get("warehouse") or settings.DEFAULT_WAREHOUSE
            return [
                KeptItem(
                    str(code),
                    self.payload,
                    posted_at=self.posted_at,
                    request_id=self.last_request_id,
                    seen_at=self.last_seen,
                )
            ]
        return [
            KeptItem.from_stored(code, kept)
            for code, kept in sorted(items.items())
            if isinstance(kept, dict)
        ]


@dataclass(frozen=True)
class KeptItem:
    """A pending key's last item for one warehouse (`PendingProduct.warehouse_items`)."""

    warehouse: str
    payload: dict[str, Any]
    posted_at: datetime | None = None
    request_id: str | None = None
    seen_at: datetime | None = None

    @classmethod
    def from_stored(cls, warehouse: str, kept: dict[str, Any]) -> KeptItem:
        payload = kept.get("payload")
        return cls(
            warehouse=warehouse,
            payload=payload if isinstance(payload, dict) else {},
            posted_at=_stored_time(kept.get("posted_at")),
            request_id=kept.get("request_id"),
            seen_at=_stored_time(kept.get("seen_at")),
        )

    def stored(self) -> dict[str, Any]:
        """The item as `warehouse_items` holds it."""
        return {
            "payload": self.payload,
            "posted_at": document_time_text(self.posted_at),
            "request_id": self.request_id,
            "seen_at": document_time_text(self.seen_at),
        }


def document_time_text(value: datetime | None) -> str | None:
    """A time as a pending key's items keep it: UTC ISO 8601 text, always with microseconds,
    so that the database compares two of them as text (the sync's upsert does)."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _stored_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


class SyncAudit(models.Model):
    """One call of a synchronization operation, whatever its outcome."""

    class Endpoint(models.TextChoices):
        """The operation called: the batch (POST products/sync) or one item (PUT products/item)."""

        BATCH = "products_sync", "Batch sync"
        ITEM = "products_item", "Single item sync"

    class Outcome(models.TextChoices):
        """What the call did: `applied` its items, `replayed` a retry's stored answer, answered
        `paused` while staff paused synchronization, `refused` it (a 4xx, nothing applied) or
        ran as a `dry_run` that wrote nothing but this row."""

        APPLIED = "applied", "Applied"
        REPLAYED = "replayed", "Replayed"
        PAUSED = "paused", "Paused"
        REFUSED = "refused", "Refused"
        DRY_RUN = "dry_run", "Dry run"

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    api_key_name = models.CharField(
        max_length=50, blank=True, default="", verbose_name="API key name"
    )
    endpoint = models.CharField(max_length=32, choices=Endpoint.choices)
    request_id = _request_id(db_index=True, verbose_name="request ID")
    source_type = models.CharField(max_length=32, null=True, blank=True)
    source_ref = models.CharField(
        max_length=TEXT_MAX_LENGTH, null=True, blank=True, verbose_name="source reference"
    )
    note = models.TextField(null=True, blank=True)
    actor = models.CharField(max_length=TEXT_MAX_LENGTH, null=True, blank=True)
    posted_at = models.DateTimeField(null=True, blank=True, verbose_name="document posted at")
    products_received = models.PositiveIntegerField(default=0)
    products_updated = models.PositiveIntegerField(default=0)
    unknown_products = models.PositiveIntegerField(default=0)
    stale_products = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    status_code = models.PositiveSmallIntegerField(verbose_name="HTTP status")
    duration_ms = models.FloatField(default=0, verbose_name="duration (ms)")
    error_summary = models.TextField(blank=True, default="")
    # The names of the body's members the call ignored (`ignored_fields` of its answer).
    ignored_fields = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        verbose_name = "sync audit"

    def __str__(self) -> str:
        return f"{self.get_endpoint_display()} {self.outcome} {self.created_at:%Y-%m-%d %H:%M:%S}"


class ProductHistory(models.Model):
    """A change of a product's quantity, price or status, and the sync that made it."""

    class Field(models.TextChoices):
        SHOP_QUANTITY = "shop_quantity", "Shop quantity"
        CATALOG_PRICE = "catalog_price", "Catalog price"
        ESHOP_PRICE = "eshop_price", "E-shop price"
        STATUS = "status", "Status"

    # No database-level foreign keys: a batch writes up to 20,000 history rows, and PostgreSQL
    # checks deferred foreign keys one row at a time at commit, which cost as much as the whole
    # rest of the batch. Django still cascades deletes (products, purged audits) and the columns
    # stay indexed; history is only ever written by the sync and pending-key services.
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="history", db_constraint=False
    )
    audit = models.ForeignKey(
        SyncAudit,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="history",
        db_constraint=False,
    )
    field = models.CharField(max_length=32, choices=Field.choices)
    old_value = models.CharField(max_length=64, null=True, blank=True)
    new_value = models.CharField(max_length=64, null=True, blank=True)
    changed_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When the stock document that made the change was posted, if the sync said so.
    posted_at = models.DateTimeField(null=True, blank=True, verbose_name="document posted at")
    source = models.CharField(max_length=64, blank=True, default="sync")

    class Meta:
        ordering = ("-changed_at", "-id")
        verbose_name = "product history"
        verbose_name_plural = "product history"

    def __str__(self) -> str:
        return f"{self.field}: {self.old_value} → {self.new_value}"

    @staticmethod
    def value_text(value: Any) -> str | None:
        """How a value is kept in old_value/new_value: decimals without trailing zeros."""
        if value is None:
            return None
        if isinstance(value, Decimal):
            return format(value.normalize(), "f")
        return str(value)


class SyncControl(models.Model):
    """The staff switch that pauses synchronization (for a stock take); a single row."""

    paused = models.BooleanField(default=False)
    reason = models.CharField(max_length=255, blank=True, default="")
    changed_by = models.CharField(max_length=150, blank=True, default="")
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "synchronization switch"

    def __str__(self) -> str:
        return "paused" if self.paused else "running"


class IdempotencyRecord(models.Model):
    """The stored response of an applied request, replayed to a retry of the same request."""

    api_key_id = models.CharField(max_length=150)
    endpoint = models.CharField(max_length=32)
    request_id = models.CharField(max_length=REQUEST_ID_MAX_LENGTH)
    # The authority: the hash of the body's canonical JSON (the same content, whatever its layout).
    body_hash = models.CharField(max_length=64)
    # A shortcut: a 128-bit hash of the exact bytes of the applied request
    # (sync.idempotency.raw_body_hash), so that a retry repeating them is answered before
    # its body is parsed. Only bytes equal imply the same request_id.
    raw_body_hash = models.CharField(max_length=64, null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    # The applied request's sync_context, as its audit row has it, for the replay's audit row.
    context = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(
                fields=("api_key_id", "endpoint", "request_id", "body_hash"),
                name="catalog_idempotency_key",
            ),
        )
        indexes = (
            models.Index(
                fields=("api_key_id", "endpoint", "raw_body_hash"),
                name="catalog_idempotency_raw",
            ),
        )

    def __str__(self) -> str:
        return f"{self.endpoint} {self.request_id}"
