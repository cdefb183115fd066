"""The stock on a product's page (`ProductAdmin`, in `sync.admin.products`): its level in each
warehouse and its newest movements."""

from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from catalog.models import Product
from core.display import local_time
from stock.admin.shared import changelist_url, movement_source
from stock.models import StockLevel, StockMovement

MOVEMENTS_ON_PAGE = 50


def level_shortfall(level: StockLevel) -> int:
    """Units a selling level lacks for its reservations: what it takes off the product's
    salable beyond handing over nothing itself (0 for a level at or above its reserved)."""
    if not level.warehouse.sells:
        return 0
    return max(0, level.reserved - level.quantity)


def _level_note(level: StockLevel) -> str:
    code, quantity, reserved = level.warehouse.code, level.quantity, level.reserved
    what = (
        f"{code} is at {quantity}, below zero"
        if quantity < 0 and reserved == 0
        else f"{code} is at {quantity}, below the {reserved} its open reservations hold"
    )
    return (
        f"{what}: it hands over nothing (its salable is 0), and as the product's on hand and "
        f"reserved are sums over the selling warehouses, it lowers the product's salable by "
        f"{level_shortfall(level)} below what the other warehouses could hand over."
    )


def product_levels_table(product: Product) -> str:
    """The product's level in each warehouse, in the order units are taken (priority, then
    code), under one header row, with a note for each selling level that is negative or below
    its reservations (decisions: such a level lowers the product's salable)."""
    levels = list(
        product.levels.select_related("warehouse").order_by(
            "warehouse__priority", "warehouse__code"
        )
    )
    if not levels:
        return "No level yet: the partner system has sent no figure of this product."
    body = format_html_join(
        "",
        '<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href="{}">'
        "movements</a></td></tr>",
        (
            (
                mark_safe(' class="short"') if level_shortfall(level) else "",
                level.warehouse.code
                if level.warehouse.sells
                else format_html("{} <small>(does not sell)</small>", level.warehouse.code),
                level.quantity,
                level.reserved,
                level.salable,
                local_time(level.posted_at) if level.posted_at else "-",
                changelist_url(
                    StockMovement,
                    product__id__exact=product.pk,
                    warehouse__id__exact=level.warehouse_id,
                ),
            )
            for level in levels
        ),
    )
    notes = format_html_join(
        "",
        '<p class="level-note">{}</p>',
        ((_level_note(level),) for level in levels if level_shortfall(level)),
    )
    return format_html(
        '<table class="stock-levels"><thead><tr><th>Warehouse</th><th>On hand</th>'
        "<th>Reserved</th><th>Salable</th><th>Document posted at</th><th></th></tr></thead>"
        "<tbody>{}</tbody></table>{}",
        body,
        notes,
    )


def product_movements_table(product: Product) -> str:
    """The product's newest movements, with a link to all of them (filterable by warehouse and
    reason)."""
    movements = product.movements.select_related(
        "warehouse", "sync_audit", "order", "snapshot"
    ).order_by("-created_at", "-id")
    rows = list(movements[:MOVEMENTS_ON_PAGE])
    if not rows:
        return "No movements recorded yet."
    total = product.movements.count()
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                local_time(row.created_at),
                row.warehouse.code,
                row.get_kind_display(),
                "-" if row.before is None else row.before,
                row.after,
                row.get_reason_display(),
                movement_source(row),
            )
            for row in rows
        ),
    )
    return format_html(
        '<table class="stock-movements"><thead><tr><th>When</th><th>Warehouse</th>'
        "<th>What moved</th><th>Before</th><th>After</th><th>Reason</th><th>Source</th>"
        '</tr></thead><tbody>{}</tbody></table><p><a class="all-movements" href="{}">'
        "All movements ({})</a>, by warehouse and reason</p>",
        body,
        changelist_url(StockMovement, product__id__exact=product.pk),
        total,
    )
