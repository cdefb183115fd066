"""The order states table is the only place that names a status: everything else reads it."""

import ast
from pathlib import Path

import pytest

from orders.models import Order
from orders.states import (
    FINAL_STATUSES,
    PARTNER_REPORTED_STATUSES,
    PARTNER_STATUS_FILTERS,
    STATUS_TRANSITIONS,
    MovedBy,
    OrderStatus,
    PartnerStatus,
    effective_status,
    status_change_allowed,
)

ROOT = Path(__file__).resolve().parents[2]
# The code that speaks of orders' statuses (products and plants have a `status` of their own).
ORDER_CODE = [
    *sorted((ROOT / "orders").glob("*.py")),
    *sorted((ROOT / "orders" / "management" / "commands").glob("*.py")),
    ROOT / "partner_api" / "orders.py",
    ROOT / "partner_api" / "order_schemas.py",
    ROOT / "partner_api" / "shop.py",
    *sorted((ROOT / "monitoring").glob("*.py")),
]
STATUS_NAMES = {"status", "partner_sync_status", "partner_status"}
KNOWN = {*OrderStatus.values, *PartnerStatus.values, *PARTNER_STATUS_FILTERS}


def test_the_transitions_cover_every_status_and_lead_to_statuses():
    assert set(STATUS_TRANSITIONS) == set(OrderStatus.values)
    for targets in STATUS_TRANSITIONS.values():
        assert set(targets) <= set(OrderStatus.values)
        for movers in targets.values():
            assert movers and movers <= set(MovedBy.values)
    assert set(PARTNER_REPORTED_STATUSES) == {"shipped", "delivered", "cancelled"}
    assert {"delivered", "cancelled"} == FINAL_STATUSES


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        ("new", "shipped", True),
        ("new", "cancelled", True),
        ("new", "delivered", False),
        ("processing", "shipped", True),  # an imported order's own status counts as new
        ("shipped", "delivered", True),
        ("shipped", "cancelled", False),
        # A partially shipped order moves on only by its shipments.
        ("partially_shipped", "shipped", False),
        ("partially_shipped", "delivered", False),
        ("partially_shipped", "cancelled", False),
        ("delivered", "cancelled", False),
        ("cancelled", "shipped", False),
    ],
)
def test_transitions(current, target, allowed):
    assert status_change_allowed(current, target) is allowed


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        ("new", "partially_shipped", True),
        ("processing", "partially_shipped", True),
        ("new", "shipped", True),
        ("partially_shipped", "shipped", True),
        ("shipped", "delivered", True),
        ("new", "cancelled", False),
        ("partially_shipped", "delivered", False),
        ("shipped", "partially_shipped", False),
        ("delivered", "shipped", False),
    ],
)
def test_moves_by_shipments(current, target, allowed):
    assert status_change_allowed(current, target, by=MovedBy.SHIPMENTS) is allowed


def test_an_unknown_status_counts_as_new():
    assert effective_status("processing") == "new"
    assert effective_status("shipped") == "shipped"


def test_the_model_reads_its_choices_from_the_table():
    field = Order._meta.get_field("partner_sync_status")
    assert [value for value, _ in field.choices] == PartnerStatus.values


def _status_literals(path: Path):
    """String constants the code gives or compares to a status: `status="x"`,
    `order.status == "x"`, `order.status = "x"`, `{"status": "x"}`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def named(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in STATUS_NAMES) or (
            isinstance(node, ast.Name) and node.id in STATUS_NAMES
        )

    def literal(node):
        return (
            node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in STATUS_NAMES:
            found = literal(node.value)
            if found is not None:
                yield node.lineno, found
        elif isinstance(node, ast.Compare) and named(node.left):
            for comparator in node.comparators:
                elements = (
                    comparator.elts
                    if isinstance(comparator, ast.Tuple | ast.List | ast.Set)
                    else [comparator]
                )
                for element in elements:
                    if (found := literal(element)) is not None:
                        yield node.lineno, found
        elif isinstance(node, ast.Assign) and any(named(t) for t in node.targets):
            if (found := literal(node.value)) is not None:
                yield node.lineno, found
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if literal(key) in STATUS_NAMES and (found := literal(value)) is not None:
                    yield node.lineno, found


def test_no_code_uses_a_status_the_table_lacks():
    unknown = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in ORDER_CODE
        if "migrations" not in path.parts
        for line, value in _status_literals(path)
        if value not in KNOWN
    ]
    assert unknown == []


def test_the_scan_finds_a_status_the_table_lacks(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'order.status = "returned"\n'
        'Order.objects.filter(status="lost")\n'
        'if order.partner_sync_status == "with_carrier": pass\n'
        'body = {"status": "on_hold"}\n'
    )
    assert sorted(value for _, value in _status_literals(planted)) == [
        "lost",
        "on_hold",
        "returned",
        "with_carrier",
    ]
