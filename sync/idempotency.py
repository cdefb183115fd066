"""Retries of applied sync calls: every claim and every replay.

A request with a request_id claims (key, endpoint, request_id, canonical body hash) in the
sync's transaction; an identical retry within the retention window finds the stored result
and replays it, audited as a replay. Three ways lead to a stored result:

- `replay_by_raw_body`: the retry repeats an applied request's exact bytes (looked up before
  the body is parsed: the cheapest);
- `claim_or_stored` (and `stored_result`, which claims nothing): the canonical body hash, in
  the sync's transaction;
- `replay_of_applied`: a retry that validation alone would refuse, but whose body canonicalises
  equal to an applied one.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import xxhash
from django.conf import settings
from django.db import connection
from django.utils import timezone

from catalog.models import IdempotencyRecord, SyncAudit
from core.canonical import canonical_digest
from core.retry import run_with_retry
from sync import audit
from sync.call import SyncCall, SyncResult

# A member "request_id" whose value is not null, as it appears in the raw bytes.
NAMES_A_REQUEST_ID = re.compile(rb'"request_id"[ \t\r\n]*+:[ \t\r\n]*+(?!null)')
_REQUEST_ID_NAME = b'"request_id"'


def body_hash(data: Any, *, raw: bytes | None = None, sorted_bytes: bytes | None = None) -> str:
    """Hash of the body's canonical JSON (RFC 8785's equality): the same content hashes the
    same, whatever its layout and number spelling. `raw`, the bytes `data` was parsed from, and
    `sorted_bytes`, the parser's sorted bytes of it, when known: the same hash, sooner
    (`core.canonical.canonical_json`)."""
    return canonical_digest(data, raw=raw, sorted_bytes=sorted_bytes)


def raw_body_hash(raw: bytes) -> str | None:
    """A 128-bit hash (XXH3) of a body's exact bytes, kept with an applied request's record;
    None when the body names no request_id (nothing to replay or keep: a request with none, or
    null, leaves no record). A request_id spelled with escapes is missed; its retry is still
    replayed by the canonical hash.

    Not a cryptographic hash, on purpose: it is looked up among the records of the caller's own
    key, which only that key's holder can make, so a contrived collision gains nothing the
    holder could not get by sending the other body; a chance one is 1 in 2^128. XXH3 hashes a
    5000-item batch in 0.1 ms, sha256 in 1.7 ms: most of a replay's own work.
    """
    if not names_a_request_id(raw):
        return None
    return xxhash.xxh3_128_hexdigest(raw)


def names_a_request_id(raw: bytes) -> bool:
    """Whether a JSON body's bytes name a request_id that is not null (as unescaped text)."""
    # The name is looked for with bytes.rfind (a batch names it after 3 MB of products), the
    # pattern tried only where it stands.
    position = raw.rfind(_REQUEST_ID_NAME)
    while position != -1:
        if NAMES_A_REQUEST_ID.match(raw, position):
            return True
        position = raw.rfind(_REQUEST_ID_NAME, 0, position)
    return False


def _cutoff(now):
    return now - timedelta(hours=settings.IDEMPOTENCY_RETENTION_HOURS)


def _replayed(call: SyncCall, stored: dict[str, Any]) -> SyncResult:
    """The stored result of an identical applied request, audited as a replay."""
    result = SyncResult.from_stored(stored)
    audit.record(
        call,
        SyncAudit.Outcome.REPLAYED,
        updated=result.updated,
        unknown=result.unknown,
        stale=result.stale,
    )
    return result


def replay_by_raw_body(call: SyncCall, *, raw_hash: str) -> SyncResult | None:
    """The stored result of an applied request whose exact bytes this request repeats, or None.

    A shortcut taken before the body is parsed: equal bytes are the same request_id and the
    same canonical body, so the answer is the one the sync would replay (while paused too),
    audited the same way. None (a miss) leaves the request to the sync, where the canonical
    hash decides: a re-serialised retry, a request still in flight (not committed, so not seen
    here) and an expired record are all handled there.
    """
    return run_with_retry(lambda: _raw_replay_attempt(call, raw_hash))


def _raw_replay_attempt(call: SyncCall, raw_hash: str) -> SyncResult | None:
    # Two statements in autocommit: a busy SQLite database fails the audit row's insert whole.
    found = (
        IdempotencyRecord.objects.filter(
            api_key_id=call.client.key_id,
            endpoint=call.endpoint,
            raw_body_hash=raw_hash,
            response__isnull=False,
            created_at__gte=_cutoff(timezone.now()),
        )
        .order_by("-created_at")
        .values_list("response", "context")
        .first()
    )
    if found is None:
        return None
    stored, context = found
    return _replayed(
        SyncCall(
            client=call.client,
            single=call.single,
            started=call.started,
            request_id=stored.get("request_id"),
            context=context if isinstance(context, dict) else None,
            received=stored["products_received"],
            ignored_fields=tuple(stored.get("ignored_fields", ())),
        ),
        stored,
    )


def replay_of_applied(call: SyncCall, *, body_hash: str) -> SyncResult | None:
    """The stored result of an applied request with this key, request_id and canonical body.

    For a request that fails validation: its body may still canonicalise equal to one that was
    applied (numbers spelt otherwise), and then its answer is the original one. Audited as a
    replay; None (and nothing written) when there is no such request within the retention
    window.
    """
    stored = stored_result(call, body_hash=body_hash, now=timezone.now())
    if stored is None:
        return None
    return _replayed(call, stored)


def stored_result(call: SyncCall, *, body_hash: str, now) -> dict[str, Any] | None:
    """The stored response of an applied request with this key, request_id and canonical body,
    within the retention window; read without claiming anything."""
    return (
        IdempotencyRecord.objects.filter(
            api_key_id=call.client.key_id,
            endpoint=call.endpoint,
            request_id=call.request_id,
            body_hash=body_hash,
            created_at__gte=_cutoff(now),
            response__isnull=False,
        )
        .values_list("response", flat=True)
        .first()
    )


def replay_stored(call: SyncCall, stored: dict[str, Any]) -> SyncResult:
    """A stored result found in the sync's transaction, audited as a replay."""
    return _replayed(call, stored)


def _db_datetime(value):
    return (
        connection.ops.adapt_datetimefield_value(value) if connection.vendor == "sqlite" else value
    )


def claim_or_stored(
    call: SyncCall, *, body_hash: str, now
) -> tuple[int | None, dict[str, Any] | None]:
    """Claim (key, endpoint, request_id, body) for this request, or return the stored response.

    A concurrent identical request blocks on the unique index until this transaction ends,
    then finds the committed record and replays it. A record past the retention window is
    taken over as if it did not exist.
    """
    table = connection.ops.quote_name(IdempotencyRecord._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (api_key_id, endpoint, request_id, body_hash, response, created_at) "
            f"VALUES (%s, %s, %s, %s, NULL, %s) "
            f"ON CONFLICT (api_key_id, endpoint, request_id, body_hash) DO UPDATE "
            f"SET created_at = excluded.created_at, response = NULL "
            f"WHERE {table}.created_at < %s RETURNING id",
            [
                call.client.key_id,
                call.endpoint,
                call.request_id,
                body_hash,
                _db_datetime(now),
                _db_datetime(_cutoff(now)),
            ],
        )
        row = cursor.fetchone()
    if row is not None:
        return row[0], None
    stored = (
        IdempotencyRecord.objects.filter(
            api_key_id=call.client.key_id,
            endpoint=call.endpoint,
            request_id=call.request_id,
            body_hash=body_hash,
        )
        .values_list("response", flat=True)
        .first()
    )
    return None, stored


def keep_result(
    claim_id: int, result: SyncResult, *, raw_hash: str | None, context_columns: dict | None
) -> None:
    """Keep an applied result with its claim, for the replay of the same request."""
    IdempotencyRecord.objects.filter(pk=claim_id).update(
        response=result.stored(), raw_body_hash=raw_hash, context=context_columns
    )


def release_claim(claim_id: int) -> None:
    """Give a claim up: the request was refused, and its retry is processed afresh."""
    IdempotencyRecord.objects.filter(pk=claim_id).delete()
