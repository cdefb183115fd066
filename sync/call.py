"""What a sync call is and what it answers: the caller, the facts its audit row names, the
result, and the refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from catalog.models import SyncAudit
from catalog.schemas import SyncContext
from core.problems import Problem, Refused


@dataclass(frozen=True)
class SyncClient:
    """Who calls: the API key's id (for idempotency) and name (for the audit)."""

    key_id: str
    key_name: str


@dataclass(frozen=True)
class SyncCall:
    """The facts of one call that its audit row names, as far as they are known.

    Before the body is read only the caller (None when its key was not valid), the operation
    and the arrival time are known; reading the body adds its request_id, sync_context (or
    their columns, as a stored record keeps them) and item count.
    """

    client: SyncClient | None
    single: bool
    started: float
    request_id: str | None = None
    context: SyncContext | dict[str, Any] | None = None
    received: int = 0
    # The names of the body's members the call ignores (sorted, each once).
    ignored_fields: tuple[str, ...] = ()

    @property
    def endpoint(self) -> str:
        return sync_endpoint(single=self.single)


def sync_endpoint(*, single: bool) -> str:
    """The audit's and the idempotency record's name of the operation."""
    return SyncAudit.Endpoint.ITEM if single else SyncAudit.Endpoint.BATCH


class ItemsRefused(Refused):
    """The request's items break a rule; nothing was applied.

    `call` names the call for its audit row, `unknown` the unknown or ambiguous keys it
    recorded (a single item's). The refusal's audit row is left by whoever answers it (the
    answer's status is theirs to give), with `sync.audit.record_refusal`.
    """

    def __init__(self, problems: list[Problem], *, call: SyncCall | None = None, unknown: int = 0):
        super().__init__(problems)
        self.call = call
        self.unknown = unknown


class RequestRefused(ItemsRefused):
    """The request as read breaks the interface; the problems carry their whole location."""

    located_in = ()


@dataclass(frozen=True)
class SyncResult:
    """What a sync did, for the caller to answer with."""

    success: bool
    received: int
    # Products applied: matched and not stale.
    updated: int
    unknown: int
    request_id: str | None
    # Why nothing was applied, when success is False.
    message: str | None = None
    # True when this is the stored result of an earlier identical request.
    replayed: bool = False
    # Items not applied because their product holds a later document time.
    stale: int = 0
    # {"index", "stock_code", "ean", "reason"} of each unknown or ambiguous key, by index.
    unknown_keys: list[dict[str, Any]] = field(default_factory=list)
    # {"index", "stock_code", "ean"} of each stale item, by index.
    stale_keys: list[dict[str, Any]] = field(default_factory=list)
    # A dry run: what a real call would do, `changes` listing each field it would change.
    dry_run: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)
    # The names of the body's members the call ignored, sorted, each once.
    ignored_fields: list[str] = field(default_factory=list)
    # A full snapshot's part: the snapshot record after it (`sync.snapshot_parts`).
    snapshot: dict[str, Any] | None = None

    def stored(self) -> dict[str, Any]:
        """The result as it is kept for replay (the layout of the sync response)."""
        return {
            "success": self.success,
            "products_received": self.received,
            "products_updated": self.updated,
            "unknown_products": self.unknown,
            "stale_products": self.stale,
            "request_id": self.request_id,
            "unknown_keys": self.unknown_keys,
            "stale_keys": self.stale_keys,
            "ignored_fields": self.ignored_fields,
            **({"snapshot": self.snapshot} if self.snapshot is not None else {}),
        }

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> SyncResult:
        # A response stored before a field existed answers with the field's default.
        return cls(
            success=stored["success"],
            received=stored["products_received"],
            updated=stored.get("products_updated", 0),
            unknown=stored.get("unknown_products", 0),
            request_id=stored.get("request_id"),
            replayed=True,
            stale=stored.get("stale_products", 0),
            unknown_keys=stored.get("unknown_keys", []),
            stale_keys=stored.get("stale_keys", []),
            ignored_fields=stored.get("ignored_fields", []),
            snapshot=stored.get("snapshot"),
        )
