"""A staff member works through the back-office in a real browser (Chromium via Playwright).

The partner system's calls are real HTTP requests to the same live server, so what the page
shows is what a person would see after the ERP spoke.
"""

import json
import os
import re
import shutil
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from catalog.models import Product, SyncAudit
from orders import demo as orders_demo
from orders.models import Order
from partner_api.keys import api_key_create
from plants import demo as plants_demo
from stock import demo as stock_demo
from stock.models import StockMovement
from stock.snapshots import snapshot_commit, snapshot_open
from stock.warehouses import default_warehouse
from sync import demo as catalog_demo
from sync.pause import sync_pause_set
from tests.factories import SyncAuditFactory
from tests.orders.factories import OrderFactory

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(settings.BASE_DIR) / "test-output" / "screenshots"
PASSWORD = "Back-office-test-1"
TIMEOUT_MS = 20_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)",
    ),
]


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # beside it are still plain synchronous ones.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def erp(live_server, transactional_db):
    """Sends product syncs to the live server as the partner system does."""
    _, key = api_key_create(name="erp")

    def sync(*items: dict, request_id: str) -> dict:
        request = urllib.request.Request(
            f"{live_server.url}/api/v1/partner/products/sync",
            data=json.dumps({"products": list(items), "request_id": request_id}).encode(),
            headers={"Content-Type": "application/json", "X-API-Key": key},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
            return json.load(response)

    return sync


def _screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def _figure(page, element_id: str) -> str:
    return " ".join(page.inner_text(f"#{element_id}").split())


def _item(**fields) -> dict:
    return {
        "stock_code": "WG-205-55-16",
        "ean": "8591234500016",
        "status": "active",
        "catalog_price": 89.9,
        "eshop_price": 84.5,
        "name": "Winter Grip 205/55 R16 91H",
        "brand": "Nordway",
        "season": "winter",
        **fields,
    }


def test_staff_resolves_an_unknown_key_and_pauses_sync(live_server, erp, page):
    User.objects.create_superuser("marta", "marta@example.com", PASSWORD)
    OrderFactory.create_batch(2)
    expect = playwright_api.expect

    # Log in: the admin sends an anonymous visitor to its login page first.
    page.goto(f"{live_server.url}/admin/")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next=/admin/$"))
    page.fill("#id_username", "marta")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#sync-dashboard")).to_be_visible()
    assert _figure(page, "dash-pending-open") == "0"
    assert _figure(page, "dash-last-sync") == "never"
    assert _figure(page, "dash-orders-waiting").startswith("2 ")

    # The ERP sends a key the shop does not know.
    body = erp(_item(shop_quantity=8), request_id="PR-2026-0001")
    assert (body["success"], body["unknown_products"]) == (True, 1)

    page.reload()
    assert _figure(page, "dash-pending-open") == "1"
    assert _figure(page, "dash-last-sync").endswith("ago")
    dashboard = _screenshot(page, "dashboard.png")

    # Staff create the product from the pending key.
    page.click("#dash-pending-open a")
    expect(page.locator("#result_list")).to_contain_text("WG-205-55-16")
    expect(page.locator("#result_list")).to_contain_text("PR-2026-0001")
    page.check("#result_list input.action-select")
    page.select_option("select[name=action]", "create_products")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("Created 1 product(s)")

    page.goto(f"{live_server.url}/admin/")
    assert _figure(page, "dash-pending-open") == "0"

    # The next sync updates the product, and its page shows the history (the price) and the
    # stock movements (the quantity) growing.
    page.goto(f"{live_server.url}/admin/catalog/product/?q=WG-205-55-16")
    page.click("#result_list a:text('WG-205-55-16')")
    expect(page.locator("div.field-on_hand .readonly")).to_be_visible()
    movements = page.locator("table.stock-movements tbody tr")
    # The level the product was created with (staff created it from the pending key).
    created_with = movements.count()
    body = erp(_item(shop_quantity=5, eshop_price=79.9), request_id="SALE-2026-0042")
    assert (body["success"], body["products_updated"], body["unknown_products"]) == (True, 1, 0)

    page.reload()
    history = page.locator("table.product-history tbody tr")
    expect(history).to_have_count(1)
    expect(page.locator("table.product-history")).to_contain_text("SALE-2026-0042")
    expect(movements).to_have_count(created_with + 1)
    expect(movements.first).to_contain_text("Quantity")
    expect(movements.first).to_contain_text("SALE-2026-0042")
    expect(page.locator("div.field-on_hand .readonly")).to_have_text("5")
    _screenshot(page, "product.png")

    # Another sync that changes the quantity adds a movement, and no history row.
    erp(_item(shop_quantity=4, eshop_price=79.9), request_id="SALE-2026-0043")
    page.reload()
    expect(movements).to_have_count(created_with + 2)
    expect(movements.first).to_contain_text("SALE-2026-0043")
    expect(history).to_have_count(1)

    # Pausing for a stock take: the API then answers success false and applies nothing.
    page.goto(f"{live_server.url}/admin/")
    page.fill("#sync-switch input[name=reason]", "stock take")
    page.click("#sync-switch button[type=submit]")
    expect(page.locator("#dash-switch-state")).to_contain_text("Paused by marta")
    expect(page.locator("#dash-switch-state")).to_contain_text("stock take")
    _screenshot(page, "dashboard-paused.png")

    body = erp(_item(shop_quantity=1), request_id="SALE-2026-0044")
    assert body["success"] is False
    page.goto(f"{live_server.url}/admin/catalog/product/?q=WG-205-55-16")
    page.click("#result_list a:text('WG-205-55-16')")
    expect(page.locator("div.field-on_hand .readonly")).to_have_text("4")

    # Resuming lets the next sync through again.
    page.goto(f"{live_server.url}/admin/")
    page.click("#sync-switch button[type=submit]")
    expect(page.locator("#dash-switch-state")).to_have_text("Running")
    assert erp(_item(shop_quantity=1), request_id="SALE-2026-0045")["success"] is True

    assert dashboard.stat().st_size > 0


def _a_day_of_traffic(now) -> None:
    """The ERP syncs every 20 minutes; an outage with refused calls, a stock take; orders."""
    for minutes_ago in range(0, 24 * 60, 20):
        at = now - timedelta(minutes=minutes_ago)
        hours_ago = minutes_ago / 60
        if 8 <= hours_ago < 10:
            # A broken connector release: every call refused, and retried more often.
            for shift in (0, 7, 14):
                SyncAuditFactory(
                    outcome=SyncAudit.Outcome.REFUSED,
                    status_code=400,
                    products_updated=0,
                    created_at=at - timedelta(minutes=shift),
                )
        elif 3 <= hours_ago < 4.5:
            SyncAuditFactory(outcome=SyncAudit.Outcome.PAUSED, products_updated=0, created_at=at)
        else:
            SyncAuditFactory(products_updated=40 + (minutes_ago * 7) % 260, created_at=at)
    for hours_ago in (26, 14, 9, 9.5, 8.2, 7, 2, 1):
        OrderFactory(created_at=now - timedelta(hours=hours_ago))
    for hours_ago, done in ((20, 19), (12, 5), (6, 4)):
        OrderFactory(
            acknowledged=True,
            created_at=now - timedelta(hours=hours_ago),
            acknowledged_at=now - timedelta(hours=done),
        )


def test_the_dashboard_charts_the_last_24_hours(live_server, transactional_db, page):
    User.objects.create_superuser("marta", "marta@example.com", PASSWORD)
    _a_day_of_traffic(timezone.now())
    expect = playwright_api.expect

    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "marta")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    chart = page.locator("#sync-activity svg")
    expect(chart).to_be_visible()
    box = chart.bounding_box()
    assert box["width"] > 400 and box["height"] > 150
    expect(page.locator("#sync-activity rect.sa-refused")).not_to_have_count(0)
    expect(page.locator("#sync-activity rect.sa-paused")).not_to_have_count(0)
    expect(page.locator("#sync-activity rect.sa-accepted")).not_to_have_count(0)
    expect(page.locator("#sync-activity rect.sa-items")).not_to_have_count(0)
    expect(page.locator("#sync-activity circle.sa-point")).to_have_count(24)
    expect(page.locator("#sync-activity figcaption")).to_contain_text("refused sync calls")
    dashboard = _screenshot(page, "dashboard-activity.png")
    assert dashboard.stat().st_size > 0
    if os.environ.get("UPDATE_README_SCREENSHOT"):
        shutil.copyfile(dashboard, Path(settings.BASE_DIR) / "docs" / "img" / "dashboard.png")


def test_anonymous_visitor_is_sent_to_the_login(live_server, transactional_db, page):
    page.goto(f"{live_server.url}/admin/catalog/syncaudit/")

    playwright_api.expect(page).to_have_url(
        re.compile(r"/admin/login/\?next=/admin/catalog/syncaudit/$")
    )
    playwright_api.expect(page.locator("#id_username")).to_be_visible()


# What a laptop shows with the admin's side menu open.
WIDE_WINDOW = {"width": 1400, "height": 900}

# Wider than the window, or a table wider than the box it sits in (which then scrolls on its
# own): both mean a person scrolls sideways to read a row.
_MEASURE = """() => {
  const doc = document.documentElement;
  const sidebar = document.querySelector("#nav-sidebar");
  const tables = [...document.querySelectorAll("table")]
    .filter((table) => table.offsetParent !== null)
    .map((table) => ({
      table: table.id || table.className || table.parentElement.className,
      width: Math.ceil(table.getBoundingClientRect().width),
      container: table.parentElement.clientWidth,
    }))
    .filter((table) => table.width > table.container + 1);
  // Order numbers and stock codes (and the links that show them), and the dashboard's
  // figures, read on one line.
  const lines = (cell) => {
    const tops = new Set();
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const rect of range.getClientRects()) {
        if (rect.width > 0) tops.add(Math.round(rect.top));
      }
    }
    return tops.size;
  };
  const identifiers = [...document.querySelectorAll(
    "table .field-order_number, table .field-stock_code, " +
    "table .field-order_link, table .identifier, #sync-dashboard .figure"
  )].filter((cell) => cell.offsetParent !== null && cell.textContent.trim());
  const wrapped = identifiers
    .filter((cell) => lines(cell) > 1)
    .map((cell) => `${cell.className}: ${cell.textContent.trim()} (${lines(cell)} lines)`);
  return {
    sidebarOpen: !!sidebar && sidebar.getBoundingClientRect().width > 100,
    scrollWidth: doc.scrollWidth,
    clientWidth: doc.clientWidth,
    tables: tables,
    identifiers: identifiers.length,
    wrapped: wrapped,
  };
}"""


def _seed_every_admin_page(erp) -> None:
    """Demo data, plus what the partner system leaves: audits, history, pending keys."""
    for seed in (catalog_demo.seed, orders_demo.seed, plants_demo.seed):
        seed()
    for number in range(1, 4):
        erp(
            _item(stock_code="PT-205-55-16-W", ean="8591234567001", shop_quantity=10 - number),
            _item(stock_code="PT-225-45-17-S", ean="8591234567002", shop_quantity=number),
            _item(stock_code="WG-215-60-16-XL", ean="8591234599999", shop_quantity=6),
            _item(stock_code="PT-195-65-15-A", ean="", shop_quantity=2 + number),
            request_id=f"PR-2026-{number:04d}-STOCK-RECEIPT-WAREHOUSE-BRNO",
        )
    # A snapshot the partner system opened and committed.
    snapshot_open(
        snapshot_id="ST-2026-0001",
        warehouse=default_warehouse(),
        posted_at=timezone.now() - timedelta(hours=1),
        declared_items=5,
        by="erp",
    )
    snapshot_commit("ST-2026-0001", by="erp")
    # A migration creates this group; a test before this one may have flushed it.
    Group.objects.get_or_create(name="Sync operators")
    # The pause switch's row: paused once for a stock take, then resumed.
    sync_pause_set(paused=True, reason="stock take in the Brno warehouse", by="marta")
    sync_pause_set(paused=False, reason="", by="marta")


def test_no_admin_page_scrolls_sideways_in_a_1400_pixel_window(live_server, erp, browser):
    User.objects.create_superuser("marta", "marta@example.com", PASSWORD)
    _seed_every_admin_page(erp)
    context = browser.new_context(viewport=WIDE_WINDOW)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "marta")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    playwright_api.expect(page.locator("#sync-dashboard")).to_be_visible()

    # An order page with lines, as the shop placed it, and its reservations.
    placed = Order.objects.filter(source=Order.Source.SHOP).order_by("pk").first()
    assert placed is not None and placed.items.exists(), "the demo places shop orders"
    urls = [reverse("admin:index"), reverse("admin:orders_order_change", args=(placed.pk,))]
    # A product's "all movements" link: its movements, filterable by warehouse and reason.
    moved = StockMovement.objects.order_by("pk").first()
    assert moved is not None, "the demo and the syncs move stock"
    urls.append(
        reverse("admin:stock_stockmovement_changelist") + f"?product__id__exact={moved.product_id}"
    )
    identifiers = 0
    for model in admin.site._registry:
        opts = model._meta
        urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        first = model._default_manager.order_by("pk").first()
        assert first is not None, f"no {opts.label} to show: seed one"
        urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=(first.pk,)))
    overflowing = []
    try:
        for url in urls:
            response = page.goto(f"{live_server.url}{url}")
            assert response.status == 200, url
            measured = page.evaluate(_MEASURE)
            # The dashboard has no side menu; every other page has it open.
            assert measured["sidebarOpen"] or url == reverse("admin:index"), url
            # Every page as a person sees it, for review: test-output/screenshots/wide-*.png
            name = re.sub(r"[^\w-]+", "-", url.strip("/"))[:60]
            _screenshot(page, f"wide-{name}.png")
            identifiers += measured["identifiers"]
            if (
                measured["scrollWidth"] > measured["clientWidth"]
                or measured["tables"]
                or measured["wrapped"]
            ):
                overflowing.append((url, measured))
    finally:
        context.close()
    assert not overflowing, "\n".join(f"{url}: {measured}" for url, measured in overflowing)
    # The lists of orders, products, reservations and history, and the pages with lines.
    assert identifiers > 20


_LEVELS_PLACE = """() => {
  const top = (element) => element.getBoundingClientRect().top + window.scrollY;
  const levels = document.querySelector("table.stock-levels");
  const note = document.querySelector(".level-note");
  return {
    top: top(levels),
    bottom: top(levels) + levels.getBoundingClientRect().height,
    rows: levels.querySelectorAll("tbody tr").length,
    note: note ? top(note) + note.getBoundingClientRect().height : null,
    movements: top(document.querySelector("table.stock-movements")),
    page: document.documentElement.scrollHeight,
  };
}"""


def test_the_product_page_shows_its_levels_first_in_a_1400_pixel_window(live_server, erp, browser):
    """Staff open a product to see what each warehouse holds: the levels, their salable and
    the note on a negative level are on the first screen, above the movements."""
    User.objects.create_superuser("marta", "marta@example.com", PASSWORD)
    stock_demo.seed()
    catalog_demo.seed()
    code = "PT-195-65-15-A"
    erp(
        _item(stock_code=code, ean="", shop_quantity=2),
        _item(stock_code=code, ean="", warehouse="EAST", shop_quantity=3),
        _item(stock_code=code, ean="", warehouse="WEST", shop_quantity=-1),
        request_id="ST-2026-0101",
    )
    product = Product.objects.get(stock_code=code)
    context = browser.new_context(viewport=WIDE_WINDOW)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("#id_username", "marta")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{live_server.url}{reverse('admin:catalog_product_change', args=(product.pk,))}")
        placed = page.evaluate(_LEVELS_PLACE)
        _screenshot(page, "product-levels-first.png")
    finally:
        context.close()

    assert placed["rows"] == 3, placed
    # The whole table and its note on the first screen (900 px), under the page's header.
    assert placed["top"] < 300, placed
    assert placed["bottom"] < WIDE_WINDOW["height"], placed
    assert placed["note"] is not None and placed["note"] < WIDE_WINDOW["height"], placed
    assert placed["movements"] > placed["bottom"], placed
