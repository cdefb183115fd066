"""History rows follow their product and audit although the database keeps no foreign keys."""

import pytest

from catalog.models import ProductHistory
from tests.factories import ProductFactory, ProductHistoryFactory, SyncAuditFactory


@pytest.mark.django_db
def test_deleting_a_product_deletes_its_history():
    product, other = ProductFactory(), ProductFactory()
    ProductHistoryFactory(product=product)
    kept = ProductHistoryFactory(product=other)

    product.delete()

    assert list(ProductHistory.objects.all()) == [kept]


@pytest.mark.django_db
def test_deleting_an_audit_deletes_the_history_it_produced():
    audit = SyncAuditFactory()
    ProductHistoryFactory(audit=audit)
    kept = ProductHistoryFactory(audit=SyncAuditFactory())

    audit.delete()

    assert list(ProductHistory.objects.all()) == [kept]
