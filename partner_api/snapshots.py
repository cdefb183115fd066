"""The full snapshot operations: open, read and abandon a snapshot, send its parts, commit it,
list its absent levels (docs/API.md, "Full snapshots").

On every path the body and the query are checked first (400, 422), then the id (404), then
the snapshot's state (409). A part is a batch of the sync (`products.SyncView`) for the
snapshot's warehouse and document time; the rest call `stock.snapshots`.
"""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions

from core.problems import Problem
from partner_api.base import (
    BODY_RESPONSES,
    KEY_RESPONSES,
    OperationSchema,
    PartnerAPIView,
    answer,
    query_data,
    query_parameters,
    replayed_header,
    request_body,
    validate,
    validation_responses,
)
from partner_api.error_schemas import ErrorBody
from partner_api.exceptions import Conflict, RequestInvalid
from partner_api.product_schemas import BatchSyncRequest
from partner_api.products import DRY_RUN_PARAMETER, SyncView, query_problems
from partner_api.snapshot_examples import EXAMPLES
from partner_api.snapshot_schemas import (
    AbsentList,
    AbsentQuery,
    SnapshotCommitAnswer,
    SnapshotCommitConflict,
    SnapshotCommitRequest,
    SnapshotIdConflict,
    SnapshotOpenRequest,
    SnapshotPartResponse,
    SnapshotRecord,
    SnapshotStateConflict,
    absent_cursor_decode,
    absent_cursor_encode,
    opened_warehouse,
)
from stock.models import StockSnapshot
from stock.snapshots import (
    SnapshotConflict,
    SnapshotHeld,
    SnapshotStateRefused,
    snapshot_abandon,
    snapshot_absent_page,
    snapshot_commit,
    snapshot_find,
    snapshot_open,
)
from stock.warehouses import item_warehouse_code, warehouses_by_code
from sync.rules import unknown_warehouse_problems
from sync.snapshot_parts import (
    SnapshotPartMissing,
    SnapshotPartRefused,
    snapshot_answer,
    snapshot_id_valid,
)


class SnapshotOperationSchema(OperationSchema):
    """An operation's description with the snapshots' documented calls among its examples."""

    def get_examples(self) -> list[OpenApiExample]:
        # By the method's operation: one view serves the read and the abandonment.
        return [*super().get_examples(), *EXAMPLES.get(self.get_operation_id(), ())]


SNAPSHOT_ID_PARAMETER = OpenApiParameter(
    "snapshot_id",
    {"type": "string", "pattern": r"^[A-Za-z0-9._:-]{1,64}$"},
    OpenApiParameter.PATH,
    description="The partner system's id of the snapshot (as opened).",
)
RESPONSE_NOT_FOUND = OpenApiResponse(ErrorBody, description="No snapshot has this id.")
STATE_CONFLICT = OpenApiResponse(
    SnapshotStateConflict,
    description="The snapshot's state takes no such call: `state` names it.",
    examples=[
        OpenApiExample(
            "committed",
            value={
                "detail": "Snapshot 'CENTRAL-2026-03-02' is committed: it takes no more parts.",
                "state": "committed",
            },
        )
    ],
)


def not_found(snapshot_id: str) -> exceptions.NotFound:
    return exceptions.NotFound(f"No snapshot has the id {snapshot_id!r}.")


def state_refused(exc: SnapshotStateRefused) -> Conflict:
    return Conflict(str(exc), state=exc.snapshot.state)


def _known(snapshot_id: str) -> str:
    """The path's id, when a snapshot may have it (else 404 without asking the database)."""
    if not snapshot_id_valid(snapshot_id):
        raise not_found(snapshot_id)
    return snapshot_id


def _found(snapshot_id: str) -> StockSnapshot:
    snapshot = snapshot_find(_known(snapshot_id))
    if snapshot is None:
        raise not_found(snapshot_id)
    return snapshot


class SnapshotView(PartnerAPIView):
    """A full snapshot operation."""

    schema = SnapshotOperationSchema()


class SnapshotOpenView(SnapshotView):
    """The partner system opens a full snapshot of one warehouse."""

    operation_id = "stock_snapshots_open"

    @extend_schema(
        operation_id=operation_id,
        summary="Open a full snapshot of a warehouse",
        description=(
            "A full snapshot says: this is all the stock there is in warehouse W as of "
            "posted_at. Its parts (POST .../{snapshot_id}/items) carry the items; its commit "
            "sets to 0 every level of W that holds a quantity, that no part named and whose "
            "document time is earlier (the absent levels), unless the guard holds the commit "
            "until a person confirms the absent count. 201 with the record (state open). The "
            "same snapshot_id with the same warehouse (absent, null, empty and the default "
            "warehouse's code being one), the same posted_at instant and the same "
            "declared_items is 200 with the record as it is now; with any other value 409 "
            "naming the snapshot_id. A snapshot neither committed nor abandoned within "
            "SNAPSHOT_TTL_HOURS (24) of its opening expires (nothing zeroed, its parts "
            "applied)."
        ),
        request=SnapshotOpenRequest,
        parameters=[replayed_header("Present when the snapshot was opened before (a repeat).")],
        responses={
            201: OpenApiResponse(SnapshotRecord, description="Opened."),
            200: OpenApiResponse(SnapshotRecord, description="Opened before with these values."),
            **KEY_RESPONSES,
            409: OpenApiResponse(
                SnapshotIdConflict,
                description="The snapshot_id was opened with other values.",
                examples=[
                    OpenApiExample(
                        "another count under this id",
                        value={
                            "detail": "Snapshot 'CENTRAL-2026-03-02' was opened with other "
                            "values (warehouse 'MAIN', posted_at 2026-03-02T06:00:00+00:00, "
                            "declared_items 2).",
                            "snapshot_id": "CENTRAL-2026-03-02",
                        },
                    )
                ],
            ),
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=["snapshots"],
    )
    def post(self, request):
        problems: list[Problem] = []
        data = request_body(request, problems)
        body = None
        if not problems:
            body = validate(SnapshotOpenRequest, data, loc="body", problems=problems)
        warehouse = None
        # The warehouse is looked up whatever else is refused: every problem in one answer.
        code = body.warehouse if body is not None else opened_warehouse(data)
        if body is not None or not any(p.loc[:2] == ("body", "warehouse") for p in problems):
            found = warehouses_by_code([code])
            warehouse = found.get(item_warehouse_code(code))
            problems += (
                problem.located("body")
                for problem in unknown_warehouse_problems([code], found, single=True)
            )
        if problems:
            raise RequestInvalid(problems)
        try:
            snapshot, created = snapshot_open(
                snapshot_id=body.snapshot_id,
                warehouse=warehouse,
                posted_at=body.posted_at,
                declared_items=body.declared_items,
                by=request.user.name,
            )
        except SnapshotConflict as exc:
            raise Conflict(str(exc), snapshot_id=exc.snapshot.snapshot_id)
        return answer(
            snapshot_answer(snapshot), replayed=not created, status=201 if created else 200
        )


class SnapshotDetailView(SnapshotView):
    """One snapshot: read it, or abandon it."""

    operation_id = "stock_snapshots_get"

    @extend_schema(
        operation_id=operation_id,
        summary="Read a full snapshot",
        description="The snapshot record (an open or held one past its expiry is expired first).",
        parameters=[SNAPSHOT_ID_PARAMETER],
        responses={
            200: OpenApiResponse(SnapshotRecord, description="The record."),
            **KEY_RESPONSES,
            404: RESPONSE_NOT_FOUND,
        },
        tags=["snapshots"],
    )
    def get(self, request, snapshot_id: str):
        return answer(snapshot_answer(_found(snapshot_id)), replayed=False)

    @extend_schema(
        operation_id="stock_snapshots_abandon",
        summary="Abandon a full snapshot",
        description=(
            "Abandons an open or held snapshot: nothing is zeroed, its parts stay applied; 200 "
            "with the record (state abandoned). An abandoned one again is 200 as it is; a "
            "committed or expired one is 409 naming its state."
        ),
        parameters=[SNAPSHOT_ID_PARAMETER],
        responses={
            200: OpenApiResponse(SnapshotRecord, description="Abandoned."),
            **KEY_RESPONSES,
            404: RESPONSE_NOT_FOUND,
            409: STATE_CONFLICT,
        },
        tags=["snapshots"],
    )
    def delete(self, request, snapshot_id: str):
        try:
            snapshot = snapshot_abandon(_known(snapshot_id), by=request.user.name)
        except StockSnapshot.DoesNotExist:
            raise not_found(snapshot_id) from None
        except SnapshotStateRefused as exc:
            raise state_refused(exc) from None
        return answer(snapshot_answer(snapshot), replayed=False)


class SnapshotItemsView(SyncView):
    """A part of a full snapshot: up to 5000 items, validated, resolved, applied and answered
    exactly as a batch of the batch sync, with the snapshot's warehouse and document time. The
    request_id is required (422 at ["body", "request_id"]); the same request_id and body replay
    the stored answer (a part is never counted twice). An item's warehouse is the snapshot's:
    absent, null, empty or its code (any other code is 400 warehouse_mismatch); a
    sync_context.posted_at is absent (the snapshot's) or the snapshot's instant (else 400
    posted_at_mismatch). The answer carries `snapshot`, the record after the part: an applied
    part adds its items to received_items (a replay, a dry run and a refused part add
    nothing) and sends a held snapshot back to open. A committed, expired or abandoned snapshot
    takes no part: 409 naming its state, nothing applied."""

    schema = SnapshotOperationSchema()
    operation_id = "stock_snapshots_items"
    single = False
    request_model = BatchSyncRequest

    @extend_schema(
        operation_id=operation_id,
        summary="Send a part of a full snapshot",
        description=" ".join((__doc__ or "").split()),
        request=BatchSyncRequest,
        parameters=[
            SNAPSHOT_ID_PARAMETER,
            DRY_RUN_PARAMETER,
            replayed_header(
                "Present when the response is the stored answer to an earlier identical part."
            ),
        ],
        responses={
            200: OpenApiResponse(
                SnapshotPartResponse, description="Processed, or paused (success false)."
            ),
            **KEY_RESPONSES,
            404: RESPONSE_NOT_FOUND,
            409: STATE_CONFLICT,
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=["snapshots"],
    )
    def post(self, request, snapshot_id: str):
        return self.sync(request, snapshot_id=snapshot_id)

    def handle_exception(self, exc):
        # The sync's own refusals of a part, answered with the call for the audit row.
        if isinstance(exc, SnapshotPartMissing):
            answered = exceptions.NotFound(str(exc))
        elif isinstance(exc, SnapshotPartRefused):
            answered = Conflict(str(exc), state=exc.state)
        else:
            return super().handle_exception(exc)
        answered.call = exc.call
        return super().handle_exception(answered)


class SnapshotCommitView(SnapshotView):
    """The partner system commits a full snapshot."""

    operation_id = "stock_snapshots_commit"

    @extend_schema(
        operation_id=operation_id,
        summary="Commit a full snapshot",
        description=(
            "Sets every absent level to 0 in one transaction (as an item of the snapshot with "
            "shop_quantity 0 would: the level's document time becomes posted_at, the sums "
            "follow, reservations pinned to the warehouse booked by then are consumed, each "
            "records a snapshot_absent movement), unless the commit is held: 409 with state "
            "held and held_reasons, in this order: count_mismatch (received_items differs from "
            "declared_items), too_many_absent (more than SNAPSHOT_MAX_ABSENT_SHARE of the "
            "warehouse's levels holding a quantity, and more than SNAPSHOT_ABSENT_ALLOWED), "
            "shrunk (received_items below 1 - SNAPSHOT_MAX_SHRINK of the last committed "
            'snapshot\'s of the warehouse). `{"confirm_absent": N}` commits whatever the '
            "reasons when N is the absent count now, else it is 409 held with the current "
            "count and the record unchanged. 200 with the record (committed, absent: the levels "
            "zeroed). A committed snapshot again is 200 as it is; an expired or abandoned one "
            "is 409 naming its state. A dry run answers what the commit would do now, with "
            "`dry_run: true`, and writes nothing."
        ),
        request=SnapshotCommitRequest,
        parameters=[
            SNAPSHOT_ID_PARAMETER,
            DRY_RUN_PARAMETER,
            replayed_header("Present when the snapshot was committed before (a repeat)."),
        ],
        responses={
            200: OpenApiResponse(SnapshotCommitAnswer, description="Committed (or would be)."),
            **KEY_RESPONSES,
            404: RESPONSE_NOT_FOUND,
            409: OpenApiResponse(
                SnapshotCommitConflict,
                description=(
                    "Held (nothing zeroed; state held): held_reasons, absent, declared_items, "
                    "received_items and absent_sample; or the snapshot is expired or abandoned "
                    "(state names it)."
                ),
            ),
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=["snapshots"],
    )
    def post(self, request, snapshot_id: str):
        dry_run, problems = query_problems(request.query_params)
        data = {} if request.stream is None else request_body(request, problems)
        body = None
        if not any(problem.loc[:1] == ("body",) for problem in problems):
            # No body at all is {}; a JSON null is not an object.
            body = validate(SnapshotCommitRequest, data, loc="body", problems=problems)
        if problems:
            raise RequestInvalid(problems)
        _found(snapshot_id)
        try:
            result = snapshot_commit(
                snapshot_id,
                confirm_absent=body.confirm_absent,
                dry_run=dry_run,
                by=request.user.name,
            )
        except StockSnapshot.DoesNotExist:
            raise not_found(snapshot_id) from None
        except SnapshotStateRefused as exc:
            raise state_refused(exc) from None
        flag = {"dry_run": True} if dry_run else {}
        if isinstance(result, SnapshotHeld):
            record = result.snapshot
            raise Conflict(
                _held_detail(record.snapshot_id, result, body.confirm_absent),
                state=StockSnapshot.State.HELD,
                held_reasons=result.held_reasons,
                absent=result.absent,
                declared_items=record.declared_items,
                received_items=record.received_items,
                absent_sample=result.absent_sample,
                **flag,
            )
        return answer(
            {**snapshot_answer(result.snapshot), **flag},
            replayed=getattr(result, "replayed", False),
        )


def _held_detail(snapshot_id: str, held: SnapshotHeld, confirmed: int | None) -> str:
    if confirmed is not None:
        return (
            f"The confirmation of snapshot {snapshot_id!r} is not the absent count: "
            f"{held.absent} level(s) would be set to 0 now, not {confirmed}; nothing was "
            "zeroed. Review them and confirm that count to commit it."
        )
    return (
        f"The commit of snapshot {snapshot_id!r} is held: {', '.join(held.held_reasons)}. "
        f"{held.absent} level(s) would be set to 0; confirm that count "
        '({"confirm_absent": N}) to commit it.'
    )


class SnapshotAbsentView(SnapshotView):
    """The absent levels of a snapshot, a page at a time."""

    operation_id = "stock_snapshots_absent"

    @extend_schema(
        operation_id=operation_id,
        summary="List a full snapshot's absent levels",
        description=(
            "The levels the commit zeroes (open or held: the levels as they are now) or "
            "zeroed (committed: the quantity each held before): {stock_code, ean, quantity}, "
            "ordered by stock_code then ean (code points), `limit` at a time; follow "
            "`next_cursor` until it is null. `count` is the number in this page."
        ),
        parameters=[SNAPSHOT_ID_PARAMETER, *query_parameters(AbsentQuery)],
        responses={
            200: OpenApiResponse(AbsentList, description="A page of the absent levels."),
            **validation_responses(operation_id),
            **KEY_RESPONSES,
            404: RESPONSE_NOT_FOUND,
        },
        tags=["snapshots"],
    )
    def get(self, request, snapshot_id: str):
        query = validate(
            AbsentQuery,
            query_data(AbsentQuery, request.query_params),
            loc="query",
            context={"snapshot_id": snapshot_id},
        )
        snapshot = _found(snapshot_id)
        after = None
        if query.cursor is not None:
            after = absent_cursor_decode(query.cursor, snapshot_id)
        rows = snapshot_absent_page(snapshot, after=after, limit=query.limit + 1)
        page = rows[: query.limit]
        next_cursor = None
        if len(rows) > query.limit:
            last = page[-1]
            next_cursor = absent_cursor_encode(snapshot_id, (last["stock_code"], last["ean"] or ""))
        return answer(
            {"items": page, "count": len(page), "next_cursor": next_cursor}, replayed=False
        )
