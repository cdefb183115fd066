"""Staff review a held full snapshot in a real browser (Chromium via Playwright) in a
1400-pixel window: its page says why it was held, how many levels its commit would zero and
which; a wrong count typed is refused and zeroes nothing; the right one commits."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from stock.models import StockLevel, StockSnapshot
from stock.snapshots import snapshot_commit, snapshot_open
from stock.warehouses import default_warehouse
from tests.browser.test_back_office import (
    _MEASURE,
    CHROMIUM,
    PASSWORD,
    TIMEOUT_MS,
    WIDE_WINDOW,
    _screenshot,
    browser,  # noqa: F401 (the fixture)
    playwright_api,
)
from tests.factories import ProductFactory, set_level

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)",
    ),
]


def _held_snapshot() -> tuple[StockSnapshot, list, object]:
    """Four products the partner system stopped listing, one it listed, and a snapshot that
    declared 3 items but received none: its commit is held (count mismatch, too many absent)."""
    absent = [
        ProductFactory(stock_code=f"WG-205-55-16-{n}", ean=f"85912345000{n:02d}", shop_quantity=n)
        for n in range(1, 5)
    ]
    posted_at = timezone.now() - timedelta(hours=1)
    named = ProductFactory(stock_code="WG-215-60-16-XL", shop_quantity=0)
    set_level(named, default_warehouse(), 6, posted_at=posted_at)
    snapshot, _ = snapshot_open(
        snapshot_id="ST-2026-11-28-MAIN",
        warehouse=default_warehouse(),
        posted_at=posted_at,
        declared_items=3,
        by="erp",
    )
    held = snapshot_commit(snapshot.snapshot_id, by="erp")
    assert (held.absent, held.held_reasons) == (4, ["count_mismatch", "too_many_absent"])
    return snapshot, absent, named


def _quantities(products) -> list[int]:
    return [
        StockLevel.objects.get(product=product, warehouse=default_warehouse()).quantity
        for product in products
    ]


def test_staff_refuse_a_wrong_count_then_commit_a_held_snapshot(
    live_server,
    transactional_db,
    browser,  # noqa: F811
):
    User.objects.create_superuser("marta", "marta@example.com", PASSWORD)
    snapshot, absent, named = _held_snapshot()
    expect = playwright_api.expect
    context = browser.new_context(viewport=WIDE_WINDOW)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "marta")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")

        # The list shows it held, with its counts and reasons; staff open it.
        page.goto(f"{live_server.url}{reverse('admin:stock_stocksnapshot_changelist')}")
        row = page.locator("#result_list tbody tr", has_text="ST-2026-11-28-MAIN")
        expect(row).to_contain_text("Held")
        expect(row).to_contain_text("Count mismatch, Too many absent")
        list_measured = page.evaluate(_MEASURE)
        row.locator("a", has_text="ST-2026-11-28-MAIN").click()

        # Its page: the reasons in words, the count to type, the absent levels.
        expect(page.locator("#held-reasons")).to_contain_text(
            "The partner system declared 3 items for this snapshot and 0 arrived"
        )
        expect(page.locator("#held-reasons")).to_contain_text(
            "Absent (no item of the snapshot named them): 4 of the 5 levels holding stock in MAIN."
        )
        assert page.inner_text("#count-absent").strip() == "4"
        codes = page.locator("#absent-sample tbody tr td:first-child").all_inner_texts()
        assert codes == [p.stock_code for p in absent]
        expect(page.locator("#absent-sample")).not_to_contain_text(named.stock_code)
        expect(page.locator("label[for=id_confirm_absent]")).to_contain_text("(4)")
        page_measured = page.evaluate(_MEASURE)
        _screenshot(page, "snapshot-held.png")

        # All the absent levels, a page at a time, and back.
        page.click("#absent-all")
        listed = page.locator("#absent-levels tbody tr td:first-child").all_inner_texts()
        assert listed == [p.stock_code for p in absent]
        absent_measured = page.evaluate(_MEASURE)
        page.click("text=Back to the snapshot")

        # A wrong count: refused, naming the count now; nothing zeroed.
        page.fill("#id_confirm_absent", "3")
        page.click("#snapshot-commit input[type=submit]")
        expect(page.locator(".messagelist .error")).to_contain_text(
            "Not committed: you typed 3, but 4 levels are absent now. Nothing was zeroed."
        )
        assert _quantities(absent) == [1, 2, 3, 4]
        snapshot.refresh_from_db()
        assert snapshot.state == StockSnapshot.State.HELD

        # The right one: committed, the absent levels are 0, the listed one kept.
        page.fill("#id_confirm_absent", "4")
        page.click("#snapshot-commit input[type=submit]")
        expect(page.locator(".messagelist .success")).to_contain_text(
            "Snapshot ST-2026-11-28-MAIN committed: 4 levels of MAIN set to 0."
        )
        expect(page.locator("#snapshot-summary")).to_contain_text(
            re.compile(r"4 levels of MAIN were set to 0")
        )
        expect(page.locator("#snapshot-commit")).to_have_count(0)
        _screenshot(page, "snapshot-committed.png")
    finally:
        context.close()

    assert _quantities(absent) == [0, 0, 0, 0]
    assert _quantities([named]) == [6]
    snapshot.refresh_from_db()
    assert (snapshot.state, snapshot.absent, snapshot.changed_by) == ("committed", 4, "marta")
    # No page scrolls sideways in the 1400-pixel window, nor wraps a stock code.
    for measured in (list_measured, page_measured, absent_measured):
        assert measured["sidebarOpen"], measured
        assert measured["scrollWidth"] <= measured["clientWidth"], measured
        assert not measured["tables"] and not measured["wrapped"], measured
