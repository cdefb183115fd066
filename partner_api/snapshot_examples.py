"""The full snapshot operations' documented calls (OpenAPI examples), on the demo's data as on
a fresh `make run`: a count of the central store (MAIN) that names one of the two products it
holds stock of, so that the other (the summer tyre, 4 units) is absent.

The calls follow one another as a partner system's would: the snapshot is opened, its part
sent, its commit held, then confirmed; its record and its absent levels read on the way
(tests/partner_api/test_openapi_examples.py sends each operation's calls after those it
follows). Its `posted_at` is the moment the document is generated (`DOCUMENT_TIME`), so that
its part is never stale; the times the service stores (opened_at, expires_at, committed_at)
and posted_at as answered are checked to be date-times.
"""

from typing import Any

from partner_api.documented_times import DOCUMENT_TIME
from partner_api.schema_extensions import documented_call

SNAPSHOT_ID = "CENTRAL-2026-03-02"
# Any date-time will do for the times the service stores.
_OPENED_AT = "2026-03-02T06:05:00+00:00"
_EXPIRES_AT = "2026-03-03T06:05:00+00:00"
SUMMER_TYRE_ABSENT = {"stock_code": "PT-225-45-17-S", "ean": "8591234567002", "quantity": 4}


def record(**fields: Any) -> dict[str, Any]:
    """The snapshot record as the service answers it, with these fields changed."""
    return {
        "snapshot_id": SNAPSHOT_ID,
        "warehouse": "MAIN",
        "posted_at": DOCUMENT_TIME,
        "declared_items": 1,
        "received_items": 0,
        "state": "open",
        "opened_at": _OPENED_AT,
        "expires_at": _EXPIRES_AT,
        "committed_at": None,
        "absent": None,
        "held_reasons": [],
        **fields,
    }


PATH = {"snapshot_id": SNAPSHOT_ID}

EXAMPLES = {
    "stock_snapshots_open": documented_call(
        "central store count",
        description=(
            "The ERP's stock take of the central store (MAIN): one item, sent in one part."
        ),
        request={
            "snapshot_id": SNAPSHOT_ID,
            "warehouse": "MAIN",
            "posted_at": DOCUMENT_TIME,
            "declared_items": 1,
        },
        status=201,
        response=record(),
    ),
    "stock_snapshots_get": documented_call(
        "opened", description="The snapshot just opened.", path=PATH, status=200, response=record()
    ),
    "stock_snapshots_items": documented_call(
        "part 1",
        description=(
            "The count's one part: the winter tyre. Items name no warehouse (the snapshot's) "
            "and no posted_at (the snapshot's)."
        ),
        path=PATH,
        request={
            "request_id": f"{SNAPSHOT_ID}:part:1",
            "sync_context": {"source_type": "stock_adjustment", "source_ref": SNAPSHOT_ID},
            "products": [
                {
                    "stock_code": "PT-205-55-16-W",
                    "ean": "8591234567001",
                    "status": "active",
                    "shop_quantity": 10,
                    "catalog_price": 89.9,
                    "eshop_price": 84.5,
                }
            ],
        },
        status=200,
        response={
            "success": True,
            "products_received": 1,
            "products_updated": 1,
            "unknown_products": 0,
            "stale_products": 0,
            "request_id": f"{SNAPSHOT_ID}:part:1",
            "unknown_keys": [],
            "stale_keys": [],
            "ignored_fields": [],
            "snapshot": record(received_items=1),
        },
    ),
    "stock_snapshots_absent": documented_call(
        "what the commit zeroes",
        description="The summer tyre, which the count does not name, is absent.",
        path=PATH,
        query={"limit": 100},
        status=200,
        response={"items": [SUMMER_TYRE_ABSENT], "count": 1, "next_cursor": None},
    ),
    "stock_snapshots_commit": [
        *documented_call(
            "held",
            description=(
                "The commit is held: one of the two levels holding stock would be set to 0 "
                "(more than SNAPSHOT_MAX_ABSENT_SHARE)."
            ),
            path=PATH,
            request={},
            status=409,
            response={
                "detail": (
                    f"The commit of snapshot '{SNAPSHOT_ID}' is held: too_many_absent. 1 "
                    'level(s) would be set to 0; confirm that count ({"confirm_absent": N}) '
                    "to commit it."
                ),
                "state": "held",
                "held_reasons": ["too_many_absent"],
                "absent": 1,
                "declared_items": 1,
                "received_items": 1,
                "absent_sample": [SUMMER_TYRE_ABSENT],
            },
        ),
        *documented_call(
            "confirmed",
            description=(
                "A person checked the absent listing: the summer tyre is gone. The confirmed "
                "count commits it."
            ),
            path=PATH,
            request={"confirm_absent": 1},
            status=200,
            response=record(
                received_items=1,
                state="committed",
                committed_at="2026-03-02T06:20:00+00:00",
                absent=1,
                held_reasons=["too_many_absent"],
            ),
        ),
    ],
}
