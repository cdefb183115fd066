"""Request and response shapes of the full snapshot operations (open, read, abandon, parts,
commit, the absent levels), as pydantic models, and their documented calls.

A part's body is the batch sync's (`product_schemas.BatchSyncRequest`); its answer is the
sync's with the snapshot record. The rules themselves live in `stock.snapshots`.
"""

import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from django.core import signing
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from catalog.schemas import PostedAt, WarehouseCode
from orders.schemas import strict_integer
from partner_api.product_schemas import SyncResponse
from partner_api.schema_extensions import sometimes
from stock.models import SNAPSHOT_ID_PATTERN, StockSnapshot

DECLARED_ITEMS_MAX = 10_000_000
ABSENT_LIMIT_MAX = 1000
ABSENT_LIMIT_DEFAULT = 100
_SNAPSHOT_ID = re.compile(SNAPSHOT_ID_PATTERN)


# ------------------------------------------------------------------------------
# Requests
# ------------------------------------------------------------------------------
def _snapshot_id(value: Any) -> str:
    if not isinstance(value, str):
        raise PydanticCustomError("string_type", "Input should be a valid string")
    stripped = value.strip()
    if not _SNAPSHOT_ID.match(stripped):
        raise PydanticCustomError(
            "string_pattern_mismatch",
            "A snapshot_id is 1 to 64 characters of A-Z a-z 0-9 . _ : - (after stripping)",
        )
    return stripped


def _present(value: datetime | None) -> datetime:
    if value is None:
        raise PydanticCustomError("datetime_type", "Input should be a valid datetime, not null")
    return value


SnapshotId = Annotated[
    str,
    BeforeValidator(_snapshot_id),
    WithJsonSchema({"type": "string", "pattern": r"^\s*[A-Za-z0-9._:-]{1,64}\s*$"}),
]
RequiredPostedAt = Annotated[
    PostedAt, AfterValidator(_present), WithJsonSchema({"type": "string", "format": "date-time"})
]
Count = Annotated[
    Annotated[int, Field(ge=0, le=DECLARED_ITEMS_MAX)], BeforeValidator(strict_integer)
]
Confirmation = Annotated[Annotated[int, Field(ge=0)], BeforeValidator(strict_integer)]


def _integer_as_text(value: Any) -> Any:
    # As the sync reads an item's warehouse: a JSON integer is its digits (7 is "7").
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def opened_warehouse(data: Any) -> str | None:
    """The warehouse code an opening's body names as the request reads it (stripped, an integer
    as its digits), or None when it names none or no text: looked up even when another member
    is refused, so that an unknown warehouse is listed with every other problem."""
    value = _integer_as_text(data.get("warehouse")) if isinstance(data, dict) else None
    return value.strip() or None if isinstance(value, str) else None


OpenedWarehouse = Annotated[WarehouseCode | None, BeforeValidator(_integer_as_text)]


class SnapshotOpenRequest(BaseModel):
    """Opens a full snapshot of one warehouse."""

    model_config = ConfigDict(extra="ignore")

    snapshot_id: SnapshotId = Field(
        description=(
            "The partner system's own id for this count: 1 to 64 characters of "
            "A-Z a-z 0-9 . _ : - after stripping; unique across the service."
        ),
        examples=["CENTRAL-2026-03-02"],
    )
    warehouse: OpenedWarehouse = Field(
        default=None,
        description=(
            "The code of the warehouse counted (a JSON integer is read as its digits, as an "
            "item's warehouse); absent, null or empty: the default warehouse. "
            "A code no stored warehouse has is 422 unknown_warehouse."
        ),
        examples=["MAIN"],
    )
    posted_at: RequiredPostedAt = Field(
        description=(
            "The document time of the count, read as sync_context.posted_at (a naive value in "
            "the service's TIME_ZONE; a time that zone repeats or skips, or more than 10 "
            "minutes ahead, is 422). Every part's items carry it."
        ),
    )
    declared_items: Count = Field(
        description=(
            "How many items the snapshot's parts will carry in all: a JSON integer, 0 to "
            "10,000,000. A commit is held while the parts received differ from it."
        ),
        examples=[2],
    )


class SnapshotCommitRequest(BaseModel):
    """Commits a full snapshot: `{}`, or `{"confirm_absent": N}` to commit a held one."""

    model_config = ConfigDict(extra="forbid")

    # Absent is a commit; null is not a count (422), nor anything but a JSON integer.
    confirm_absent: Confirmation = Field(  # type: ignore[assignment]
        default=None,
        description=(
            "A person's confirmation of a held commit: the number of absent levels it zeroes "
            "(a JSON integer of at least 0). Committed whatever the reasons held, but only when "
            "it equals the absent levels at that moment; else 409 held with the current count."
        ),
        examples=[1],
    )


class _CursorSerializer:
    def dumps(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode("latin-1")

    def loads(self, data: bytes) -> Any:
        return json.loads(data.decode("latin-1"))


def _cursor_signer() -> signing.Signer:
    # As the orders feed's: "." joins value and signature, so that the cursor is URL-safe.
    return signing.Signer(salt="stock.snapshots.absent.cursor", sep=".")


def absent_cursor_encode(snapshot_id: str, after: tuple[str, str]) -> str:
    """The signed, URL-safe cursor of a page of a snapshot's absent levels that ends at `after`
    (stock_code, ean)."""
    return _cursor_signer().sign_object(
        [snapshot_id, after[0], after[1]], serializer=_CursorSerializer
    )


def absent_cursor_decode(text: str, snapshot_id: str) -> tuple[str, str] | None:
    """The (stock_code, ean) a cursor of this snapshot's listing goes on after; None for any
    other text (not issued by this service, or for another snapshot)."""
    try:
        value = _cursor_signer().unsign_object(text, serializer=_CursorSerializer)
    except (signing.BadSignature, ValueError, TypeError, UnicodeError):
        return None
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(isinstance(part, str) for part in value)
        or value[0] != snapshot_id
    ):
        return None
    return value[1], value[2]


def _limit(value: Any) -> Any:
    if value is None or value == "":
        return ABSENT_LIMIT_DEFAULT
    if isinstance(value, str) and not re.fullmatch(r"[0-9]{1,7}", value):
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


def _cursor(value: str | None, info: ValidationInfo) -> str | None:
    if value in (None, ""):
        return None
    if absent_cursor_decode(value, (info.context or {}).get("snapshot_id", "")) is None:
        raise PydanticCustomError(
            "cursor_invalid",
            "Input should be the next_cursor of an earlier response for this snapshot",
        )
    return value


class AbsentQuery(BaseModel):
    """The absent listing's query parameters: validated with this model, documented from it."""

    model_config = ConfigDict(extra="ignore")

    limit: Annotated[
        Annotated[int, Field(ge=1, le=ABSENT_LIMIT_MAX)],
        BeforeValidator(_limit),
        WithJsonSchema({"type": "integer", "minimum": 1, "maximum": ABSENT_LIMIT_MAX}),
    ] = Field(
        default=ABSENT_LIMIT_DEFAULT,
        description="At most this many levels (1 to 1000, default 100).",
        examples=[100],
    )
    cursor: Annotated[
        str | None,
        AfterValidator(_cursor),
        WithJsonSchema({"type": "string", "pattern": r"^[A-Za-z0-9_.:\-]*$"}),
    ] = Field(
        default=None,
        description=(
            "The next_cursor of the previous page, as it was (URL-safe, opaque). Empty or "
            "absent: the first page. A cursor the service did not issue for this snapshot "
            "is 422."
        ),
    )


# ------------------------------------------------------------------------------
# Answers
# ------------------------------------------------------------------------------
SnapshotState = Literal[tuple(StockSnapshot.State.values)]  # type: ignore[valid-type]
HeldReason = Literal[tuple(StockSnapshot.HeldReason.values)]  # type: ignore[valid-type]


class SnapshotRecord(BaseModel):
    """A full snapshot as the service holds it."""

    snapshot_id: str = Field(description="The partner system's id of the count.")
    warehouse: str = Field(description="The code of the warehouse counted.")
    posted_at: datetime = Field(description="The document time of the count.")
    declared_items: int = Field(description="How many items the parts were to carry.")
    received_items: int = Field(description="The items of the parts applied so far.")
    state: SnapshotState = Field(  # type: ignore[valid-type]
        description="open, held (a commit was held), committed, expired or abandoned."
    )
    opened_at: datetime = Field(description="When it was opened.")
    expires_at: datetime = Field(
        description="When it expires unless committed or abandoned (SNAPSHOT_TTL_HOURS)."
    )
    committed_at: datetime | None = Field(description="When it was committed; null until then.")
    absent: int | None = Field(
        description=(
            "Held: the absent levels found; committed: the levels the commit set to 0; null "
            "otherwise."
        )
    )
    held_reasons: list[HeldReason] = Field(  # type: ignore[valid-type]
        description=(
            "Held: why (count_mismatch, too_many_absent, shrunk); committed: the reasons a "
            "confirmation overrode; [] otherwise."
        )
    )


class SnapshotCommitAnswer(SnapshotRecord):
    """The record after a commit (or as it would be, for a dry run)."""

    dry_run: bool = sometimes(description="true in the answer to a dry run; absent otherwise.")


class AbsentLevel(BaseModel):
    stock_code: str = Field(description="The product's stock code.")
    ean: str = Field(description='The product\'s EAN; "" when it has none.')
    quantity: int = Field(
        description="The level now; after the commit, the quantity it held before it was zeroed."
    )


class SnapshotCommitConflict(BaseModel):
    """A commit refused: held (the levels it would zero are named), or the snapshot's state."""

    detail: str
    state: SnapshotState = Field(  # type: ignore[valid-type]
        description="held for a held commit; else the state that takes no commit."
    )
    held_reasons: list[HeldReason] = sometimes(  # type: ignore[valid-type]
        description="Held: the reasons that hold, in order ([] for a confirmation that is off)."
    )
    absent: int = sometimes(description="Held: the absent levels now.")
    declared_items: int = sometimes(description="Held: the items the parts were to carry.")
    received_items: int = sometimes(description="Held: the items of the parts applied.")
    absent_sample: list[AbsentLevel] = sometimes(
        description="Held: the first 20 absent levels, in the listing's order."
    )
    dry_run: bool = sometimes(description="true in the answer to a dry run; absent otherwise.")


class SnapshotStateConflict(BaseModel):
    detail: str
    state: SnapshotState = Field(  # type: ignore[valid-type]
        description="The snapshot's state, which takes no such call."
    )


class SnapshotIdConflict(BaseModel):
    detail: str
    snapshot_id: str = Field(description="The id, opened before with other values.")


class AbsentList(BaseModel):
    items: list[AbsentLevel]
    count: int = Field(description="Number of levels in this page.")
    next_cursor: str | None = Field(
        description="The cursor of the next page when more levels follow; null on the last."
    )


class SnapshotPartResponse(SyncResponse):
    """The sync's answer to a part, with the snapshot after it."""

    snapshot: SnapshotRecord = Field(description="The snapshot record after this part.")

    model_config = ConfigDict(json_schema_extra=None)
