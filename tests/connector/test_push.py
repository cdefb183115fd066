"""The connector's rules: chunking, request_id and sync_context, statuses, retries."""

import pytest

from connector.document import DocumentNotPosted, document_from_dict
from connector.push import (
    BATCH_PATH,
    ITEM_PATH,
    RetryPolicy,
    ServiceClient,
    SyncStatus,
    push_document,
)
from connector.transport import Reply, TransportError
from tests.connector.fakes import FakeService, document

BASE = "http://erp-bridge.test:8000"


def push(service, doc, *, chunk_size=5000, attempts=4, **kwargs):
    waits = []
    client = ServiceClient(
        base_url=BASE + "/",
        api_key="secret-key",
        transport=service,
        retry=RetryPolicy(attempts=attempts, base_delay=0.5, max_delay=4),
        sleep=waits.append,
    )
    result = push_document(document_from_dict(doc), client=client, chunk_size=chunk_size, **kwargs)
    return result, waits


def known(doc):
    return {row["stock_code"] for row in doc["rows"]}


def test_a_draft_is_refused_before_any_call():
    doc = document(3, state="posted")
    parsed = document_from_dict(doc)
    draft = type(parsed)(number=parsed.number, type=parsed.type, state="draft", rows=parsed.rows)
    service = FakeService()
    client = ServiceClient(base_url=BASE, api_key="k", transport=service)

    with pytest.raises(DocumentNotPosted):
        push_document(draft, client=client)
    assert service.sent == []


def test_one_row_goes_through_the_single_item_operation():
    doc = document(1, number="SALE-77", type="sale")
    service = FakeService(known=known(doc))

    result, _ = push(service, doc)

    assert result.status == SyncStatus.SYNCED
    [sent] = service.sent
    assert (sent.method, sent.url) == ("PUT", BASE + ITEM_PATH)
    assert sent.headers["X-API-Key"] == "secret-key"
    assert sent.data == {
        **doc["rows"][0],
        "request_id": "SALE-77",
        "sync_context": {
            "source_type": "customer_sale",
            "source_ref": "SALE-77",
            "note": "chunk 1 of 1",
        },
    }


def test_several_rows_go_in_chunks_with_the_document_number_and_a_chunk_note():
    doc = document(12, number="PR-12", type="receipt")
    service = FakeService(known=known(doc))

    result, _ = push(service, doc, chunk_size=5, actor="clerk7")

    assert result.status == SyncStatus.SYNCED
    assert [(s.method, s.url) for s in service.sent] == [("POST", BASE + BATCH_PATH)] * 3
    bodies = [s.data for s in service.sent]
    assert [len(b["products"]) for b in bodies] == [5, 5, 2]
    assert [p["stock_code"] for b in bodies for p in b["products"]] == [
        r["stock_code"] for r in doc["rows"]
    ]
    assert {b["request_id"] for b in bodies} == {"PR-12"}
    assert [b["sync_context"] for b in bodies] == [
        {
            "source_type": "stock_receipt",
            "source_ref": "PR-12",
            "note": f"chunk {i} of 3",
            "actor": "clerk7",
        }
        for i in (1, 2, 3)
    ]
    assert result.products_updated == 12
    assert [c.products_updated for c in result.chunks] == [5, 5, 2]


@pytest.mark.parametrize(
    ("kind", "source_type"),
    [
        ("receipt", "stock_receipt"),
        ("issue", "stock_issue"),
        ("sale", "customer_sale"),
        ("stock_issue", "stock_issue"),
    ],
)
def test_the_source_type_follows_the_document_type(kind, source_type):
    doc = document(2, type=kind)
    service = FakeService(known=known(doc))

    push(service, doc)

    assert service.sent[0].data["sync_context"]["source_type"] == source_type


def test_a_document_with_exactly_the_limit_is_one_batch():
    doc = document(5)
    service = FakeService(known=known(doc))

    result, _ = push(service, doc, chunk_size=5)

    assert len(service.sent) == 1
    assert result.chunks_total == 1


def test_unknown_keys_make_the_document_partial_and_every_chunk_is_still_sent():
    doc = document(10)
    service = FakeService(known=known(doc) - {"SC-00001", "SC-00007"})

    result, _ = push(service, doc, chunk_size=4)

    assert result.status == SyncStatus.PARTIAL
    assert len(service.sent) == 3
    assert result.unknown_products == 2
    assert result.products_updated == 8
    assert "2 key(s) match no product" in result.reason


def test_an_unknown_key_of_a_single_row_makes_the_document_partial():
    doc = document(1)
    service = FakeService(known=set())

    result, waits = push(service, doc)

    assert result.status == SyncStatus.PARTIAL
    assert len(service.sent) == 1
    assert waits == []
    assert result.unknown_products == 1


def test_success_false_fails_the_document_and_stops_after_the_first_chunk():
    doc = document(12)
    service = FakeService(known=known(doc), paused=True)

    result, _ = push(service, doc, chunk_size=5)

    assert result.status == SyncStatus.FAILED
    assert len(service.sent) == 1
    assert "paused" in result.chunks[0].message
    assert "no further chunk was sent" in result.reason


def test_success_false_on_a_later_chunk_keeps_the_earlier_ones_and_stops():
    doc = document(12)
    service = FakeService(known=known(doc))
    paused = Reply(
        status=200,
        body=b'{"success": false, "products_received": 5, '
        b'"products_updated": 0, "unknown_products": 0, "message": "paused"}',
    )
    original = service.request
    calls = []

    def request(method, url, **kwargs):
        calls.append(url)
        return paused if len(calls) == 2 else original(method, url, **kwargs)

    service.request = request

    result, _ = push(service, doc, chunk_size=5)

    assert result.status == SyncStatus.FAILED
    assert len(calls) == 2
    assert [c.success for c in result.chunks] == [True, False]


def test_a_transport_error_is_retried_with_backoff_and_the_same_body():
    doc = document(12)
    service = FakeService(
        known=known(doc),
        script=[None, TransportError("timed out"), TransportError("connection reset")],
    )

    result, waits = push(service, doc, chunk_size=5)

    assert result.status == SyncStatus.SYNCED
    assert waits == [0.5, 1.0]
    # Chunk 1, then chunk 2 three times over, then chunk 3.
    assert len(service.sent) == 5
    assert service.sent[1].body == service.sent[2].body == service.sent[3].body
    assert service.sent[3].data["request_id"] == doc["number"]
    assert result.chunks[1].attempts == 3


def test_a_lost_response_is_retried_and_the_service_replays_it():
    doc = document(3)
    service = FakeService(known=known(doc), script=["apply-and-lose"])

    result, waits = push(service, doc)

    assert result.status == SyncStatus.SYNCED
    assert len(service.sent) == 2
    assert service.sent[0].body == service.sent[1].body
    assert result.chunks[0].replayed is True
    assert waits == [0.5]


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_server_errors_are_retried(status):
    doc = document(2)
    service = FakeService(known=known(doc), script=[status, status])

    result, waits = push(service, doc)

    assert result.status == SyncStatus.SYNCED
    assert len(service.sent) == 3
    assert waits == [0.5, 1.0]


def test_retry_after_is_honoured_up_to_the_maximum_delay():
    doc = document(2)
    busy = Reply(status=503, body=b'{"detail": "busy"}', headers={"retry-after": "3"})
    too_long = Reply(status=503, body=b'{"detail": "busy"}', headers={"retry-after": "600"})
    service = FakeService(known=known(doc), script=[busy, too_long])

    result, waits = push(service, doc)

    assert result.status == SyncStatus.SYNCED
    assert waits == [3.0, 4]


def test_a_200_without_a_json_body_is_retried():
    doc = document(2)
    service = FakeService(known=known(doc), script=[Reply(status=200, body=b"<html>proxy</html>")])

    result, _ = push(service, doc)

    assert result.status == SyncStatus.SYNCED
    assert len(service.sent) == 2


def test_when_retries_run_out_the_status_is_unchanged_and_no_further_chunk_is_sent():
    doc = document(12)
    service = FakeService(known=known(doc), script=[TransportError("refused")] * 10)

    result, waits = push(service, doc, chunk_size=5, attempts=3)

    assert result.status == SyncStatus.UNCHANGED
    assert len(service.sent) == 3
    assert waits == [0.5, 1.0]
    assert "gave up after 3 attempts" in result.reason
    assert "Push the document again later" in result.reason


def test_backoff_doubles_up_to_the_maximum():
    policy = RetryPolicy(attempts=10, base_delay=0.5, max_delay=4)

    assert [policy.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4, 4, 4]


def test_a_refused_request_fails_the_document_without_a_retry():
    doc = document(4)
    refusal = Reply(
        status=400,
        body=b'{"detail": [{"loc": ["body", "products", 2, "season"], "msg": "too long", '
        b'"type": "string_too_long"}]}',
    )
    service = FakeService(known=known(doc), script=[refusal])

    result, waits = push(service, doc)

    assert result.status == SyncStatus.FAILED
    assert len(service.sent) == 1
    assert waits == []
    assert "body.products.2.season: too long" in result.chunks[0].message


def test_a_refused_key_leaves_the_document_unchanged_without_a_retry():
    doc = document(4)
    service = FakeService(known=known(doc), script=[401])

    result, waits = push(service, doc)

    assert result.status == SyncStatus.UNCHANGED
    assert len(service.sent) == 1
    assert waits == []
    assert "API key was refused" in result.chunks[0].message


def test_fewer_matched_rows_than_sent_is_not_synced():
    doc = document(3)
    short = Reply(
        status=200,
        body=b'{"success": true, "products_received": 3, '
        b'"products_updated": 2, "unknown_products": 0}',
    )
    service = FakeService(known=known(doc), script=[short])

    result, _ = push(service, doc)

    assert result.status == SyncStatus.PARTIAL
    assert "only 2 of 3 rows" in result.chunks[0].message


def test_the_summary_names_the_status_and_every_chunk():
    doc = document(7, number="PR-SUM")
    service = FakeService(known=known(doc) - {"SC-00006"})

    result, _ = push(service, doc, chunk_size=5)

    summary = result.summary()
    assert summary.splitlines()[0] == "Document PR-SUM (receipt, 7 rows, 2 chunks): partial"
    assert "chunk 1 of 2: 5 rows, HTTP 200, updated 5, unknown 0" in summary
    assert "chunk 2 of 2: 2 rows, HTTP 200, updated 1, unknown 1" in summary
    assert result.as_dict()["sync_status"] == "partial"
