"""products_sync itself enforces the request rules: every caller gets them, not only the API."""

import time

import pytest

from catalog.models import PendingProduct, Product, SyncAudit
from catalog.schemas import ProductItem
from sync.call import ItemsRefused, SyncClient, SyncResult
from sync.service import products_sync
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item

pytestmark = pytest.mark.django_db

CLIENT = SyncClient(key_id="key-1", key_name="erp")


def sync(items, *, single=False, request_id=None):
    return products_sync(
        items=[ProductItem.model_validate(i) for i in items],
        request_id=request_id,
        context=None,
        client=CLIENT,
        single=single,
        body_hash="h" * 64 if request_id else None,
        started=time.perf_counter(),
    )


def test_a_batch_over_the_limit_is_refused_and_nothing_applied(settings):
    settings.SYNC_MAX_ITEMS = 2
    ProductFactory(stock_code="A", shop_quantity=1)
    with pytest.raises(ItemsRefused) as refused:
        sync([item("A", shop_quantity=9), item("B"), item("C")])
    [problem] = refused.value.problems
    assert (problem.loc, problem.type, problem.ctx["max_length"]) == (("products",), "too_long", 2)
    assert Product.objects.get(stock_code="A").shop_quantity == 1


def test_duplicate_keys_are_refused_and_nothing_applied():
    ProductFactory(stock_code="A", shop_quantity=1)
    with pytest.raises(ItemsRefused) as refused:
        sync([item("A", shop_quantity=9), item("A", shop_quantity=8)])
    assert [p.loc for p in refused.value.problems] == [
        ("products", 0, "stock_code"),
        ("products", 1, "stock_code"),
    ]
    assert Product.objects.get(stock_code="A").shop_quantity == 1


def test_the_result_is_data_and_a_retry_replays_it():
    ProductFactory(stock_code="A", ean="")
    first = sync([item("A", shop_quantity=4), item("NEW")], request_id="DOC-1")
    assert first == SyncResult(
        success=True,
        received=2,
        updated=1,
        unknown=1,
        request_id="DOC-1",
        unknown_keys=[
            {"index": 1, "stock_code": "NEW", "ean": "", "warehouse": "MAIN", "reason": "unknown"}
        ],
    )
    again = sync([item("A", shop_quantity=4), item("NEW")], request_id="DOC-1")
    assert again.replayed and (again.updated, again.unknown) == (1, 1)
    assert SyncAudit.objects.filter(outcome=SyncAudit.Outcome.REPLAYED).count() == 1


def test_an_unknown_single_item_is_recorded_and_refused_for_its_answer_to_audit():
    with pytest.raises(ItemsRefused) as refused:
        sync([item("NOPE")], single=True)
    assert refused.value.problems[0].type == "unknown_key"
    assert PendingProduct.objects.filter(stock_code="NOPE").exists()
    # The refusal's status is the answer's: whoever answers it leaves the audit row, with the
    # call's facts and the key it recorded.
    assert not SyncAudit.objects.exists()
    assert (refused.value.unknown, refused.value.call.endpoint) == (1, SyncAudit.Endpoint.ITEM)
