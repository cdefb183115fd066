"""A fake transport that answers like the service, so the connector's rules run without it."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from connector.cli import main
from connector.transport import Reply, TransportError


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    @property
    def data(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class FakeService:
    """Answers sync requests from a set of known stock codes, and the order poll and
    acknowledgement from `orders` (order_id -> Order record).

    `script` lists what to do before answering normally, one entry per request: a
    TransportError to raise, an int status to answer with an error body, or a Reply.
    """

    known: set[str] = field(default_factory=set)
    # Known stock codes whose product holds a later document: stale when posted_at is sent.
    newer: set[str] = field(default_factory=set)
    # What a dry run reports as changes, per stock code.
    changes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    paused: bool = False
    script: list[Any] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    applied: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    orders: dict[int, dict[str, Any]] = field(default_factory=dict)
    # The service's default warehouse: when set, the keys and changes it lists name each
    # item's warehouse (this one's code for an item that named none), as the service does.
    default_warehouse: str | None = None

    def request(
        self, method: str, url: str, *, headers: dict[str, str], body: bytes, timeout: float
    ) -> Reply:
        self.sent.append(Sent(method=method, url=url, headers=dict(headers), body=body))
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, Exception):
                raise step
            if isinstance(step, Reply):
                return step
            if isinstance(step, int):
                return _json_reply(step, {"detail": f"HTTP {step}"})
            if step == "apply-and-lose":
                self._answer(method, body, url)
                raise TransportError("RemoteDisconnected: Remote end closed connection")
        return self._answer(method, body, url)

    def _answer(self, method: str, body: bytes, url: str = "") -> Reply:
        path = urlsplit(url).path
        if path == "/api/v1/partner/orders":
            return self._poll(url)
        if path.endswith("/acknowledge"):
            return self._acknowledge(path, body)
        if path.endswith("/status"):
            return self._status(path, body)
        dry_run = "dry_run=true" in urlsplit(url).query
        data = json.loads(body)
        items = [data] if method == "PUT" else data["products"]
        base = {"products_received": len(items), "request_id": data.get("request_id")}
        if self.paused:
            return _json_reply(
                200,
                {
                    **base,
                    "success": False,
                    "products_updated": 0,
                    "unknown_products": 0,
                    "message": "Synchronization is paused by staff",
                },
            )
        if body in self.applied:
            stored = self.applied[body]
            if dry_run:
                stored = {**stored, "dry_run": True, "changes": []}
            return _json_reply(200, stored, {"Idempotent-Replayed": "true"})
        posted = (data.get("sync_context") or {}).get("posted_at") is not None
        unknown_keys, stale_keys, changes = [], [], []
        for index, item in enumerate(items):
            key = {"index": index, "stock_code": item["stock_code"], "ean": item.get("ean", "")}
            if self.default_warehouse is not None:
                key["warehouse"] = item.get("warehouse") or self.default_warehouse
            if item["stock_code"] not in self.known:
                unknown_keys.append({**key, "reason": "unknown"})
            elif posted and item["stock_code"] in self.newer:
                stale_keys.append(key)
            else:
                changes += [{**key, **c} for c in self.changes.get(item["stock_code"], [])]
        if method == "PUT" and unknown_keys:
            return _json_reply(
                400,
                {"detail": [{"loc": ["stock_code"], "msg": "No product", "type": "unknown_key"}]},
            )
        response = {
            **base,
            "success": True,
            "products_updated": len(items) - len(unknown_keys) - len(stale_keys),
            "unknown_products": len(unknown_keys),
            "stale_products": len(stale_keys),
            "unknown_keys": unknown_keys,
            "stale_keys": stale_keys,
        }
        if dry_run:
            return _json_reply(200, {**response, "dry_run": True, "changes": changes})
        self.applied[body] = response
        return _json_reply(200, response)

    def _poll(self, url: str) -> Reply:
        query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
        pending = [
            order
            for order_id, order in sorted(self.orders.items())
            if order["partner_sync_status"] == query.get("partner_status", "pending_partner")
        ]
        if query.get("cursor"):
            after = int(query["cursor"].removeprefix("after-"))
            pending = [order for order in pending if order["order_id"] > after]
        limit = int(query["limit"]) if query.get("limit") else len(pending)
        page = pending[:limit]
        more = len(pending) > limit
        return _json_reply(
            200,
            {
                "orders": page,
                "count": len(page),
                "next_cursor": f"after-{page[-1]['order_id']}" if more else None,
            },
        )

    def _acknowledge(self, path: str, body: bytes) -> Reply:
        order_id = int(re.search(r"/orders/([0-9]+)/", path)[1])
        reference = json.loads(body)["partner_reference"]
        order = self.orders.get(order_id)
        if order is None:
            return _json_reply(404, {"detail": f"Order {order_id} not found."})
        if order["partner_sync_status"] == "acknowledged":
            if order["partner_reference"] == reference:
                return _json_reply(200, order, {"Idempotent-Replayed": "true"})
            stored = order["partner_reference"]
            return _json_reply(
                409,
                {
                    "detail": f"Order {order_id} is already acknowledged with "
                    f"partner_reference {stored!r}.",
                    "partner_reference": stored,
                },
            )
        order.update(partner_sync_status="acknowledged", partner_reference=reference)
        return _json_reply(200, order)

    def _status(self, path: str, body: bytes) -> Reply:
        """The service's rules of the status operation, on the orders of this fake."""
        from connector.order_status import STATUS_TRANSITIONS

        order_id = int(re.search(r"/orders/([0-9]+)/", path)[1])
        data = json.loads(body)
        order = self.orders.get(order_id)
        if order is None or order["partner_sync_status"] is None:
            return _json_reply(404, {"detail": f"Order {order_id} not found."})
        if order["partner_sync_status"] == "pending_partner":
            return _json_reply(
                409,
                {
                    "detail": "acknowledge it first",
                    "status": order["status"],
                    "partner_sync_status": "pending_partner",
                },
            )
        tracking = {k: data[k] for k in ("carrier", "tracking_number", "tracking_url") if k in data}
        if order["status"] == data["status"]:
            order.update(tracking)
            return _json_reply(200, order, {"Idempotent-Replayed": "true"})
        current = order["status"] if order["status"] in STATUS_TRANSITIONS else "new"
        if "report" not in STATUS_TRANSITIONS[current].get(data["status"], ()):
            return _json_reply(409, {"detail": "refused", "status": order["status"]})
        order.update(tracking, status=data["status"], status_changed_at=data.get("changed_at"))
        return _json_reply(200, order)


def order(order_id: int, *, number: str | None = None, **fields) -> dict[str, Any]:
    """An Order record as the poll answers it, pending unless told otherwise."""
    return {
        "order_id": order_id,
        "order_number": number or f"2026{order_id:06d}",
        "created_at": "2026-03-01T10:00:00+00:00",
        "status": "paid",
        "customer": {"name": "Jana Nováková", "email": "jana@example.com"},
        "items": [
            {"name": "Winter Grip 205/55 R16", "quantity": 2, "unit_price": 84.5, "total": 169.0}
        ],
        "subtotal": 169.0,
        "vat_total": 35.49,
        "total": 204.49,
        "currency": "EUR",
        "partner_sync_status": "pending_partner",
        "partner_reference": None,
        **fields,
    }


def _json_reply(status: int, data: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        body=json.dumps(data).encode(),
        headers={
            "content-type": "application/json",
            **{k.lower(): v for k, v in (headers or {}).items()},
        },
    )


def rows(count: int, *, prefix: str = "SC", start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "stock_code": f"{prefix}-{index:05d}",
            "ean": f"859{index:010d}",
            "status": "active",
            "shop_quantity": index % 7,
            "catalog_price": 100,
            "eshop_price": 89.5,
        }
        for index in range(start, start + count)
    ]


def document(
    count: int = 3,
    *,
    number: str = "PR-2026-0001",
    type: str = "receipt",
    state: str = "posted",
    **kwargs,
) -> dict[str, Any]:
    return {"number": number, "type": type, "state": state, "rows": rows(count, **kwargs)}


# The command line run in process against a fake service, and a stream that says it is a terminal.
class Terminal(io.StringIO):
    def isatty(self):
        return True


def run(args, service, *, stdin=None, stderr=None):
    out = io.StringIO()
    err = stderr if stderr is not None else io.StringIO()
    code = main(args, transport=service, stdout=out, stderr=err, stdin=stdin, sleep=lambda _: None)
    return code, out.getvalue(), err.getvalue()
