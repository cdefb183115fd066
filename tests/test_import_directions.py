"""Imports go one way: catalog and core import nothing from orders, monitoring, partner_api or
config, and no app imports config (config is the top: it imports the apps).

Read with `ast`, so an import inside a function counts as well; migrations are left out.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("catalog", "core", "orders", "plants", "monitoring", "partner_api")
# What each app must not import, beyond config (which no app imports).
LOWER_APPS = {
    "catalog": ("orders", "monitoring", "partner_api"),
    "core": ("orders", "monitoring", "partner_api"),
}


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def forbidden_for(app: str) -> tuple[str, ...]:
    return ("config", *LOWER_APPS.get(app, ()))


def violations_in(source: str, *, app: str, name: str) -> list[str]:
    """The imports of `source` (a module of `app`, called `name` in the answer) that go the
    wrong way."""
    forbidden = forbidden_for(app)
    return [
        f"{name}:{line} imports {module}"
        for line, module in imported_modules(source)
        if module.split(".")[0] in forbidden
    ]


def violations(root: Path) -> list[str]:
    """Every import under `root`'s apps that goes the wrong way."""
    found = []
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:
                continue
            name = str(path.relative_to(root))
            found.extend(violations_in(path.read_text(encoding="utf-8"), app=app, name=name))
    return found


def test_imports_go_one_way():
    # catalog, core and plants are read too: every app is, for its own rules.
    assert {"catalog", "core", "plants"} <= set(APPS)
    assert violations(ROOT) == []


def test_a_planted_import_the_wrong_way_is_found():
    planted = (
        "import json\n"
        "from catalog.models import Product\n"
        "from orders.selectors import orders_waiting_summary\n"
        "def later():\n"
        "    import monitoring.metrics\n"
        "    from config.logging import request_id_context\n"
    )

    assert violations_in(planted, app="catalog", name="catalog/planted.py") == [
        "catalog/planted.py:3 imports orders.selectors",
        "catalog/planted.py:5 imports monitoring.metrics",
        "catalog/planted.py:6 imports config.logging",
    ]
    # orders may import catalog and monitoring may import orders; neither may import config.
    assert violations_in(planted, app="orders", name="o.py") == ["o.py:6 imports config.logging"]
    assert violations_in(planted, app="plants", name="p.py") == ["p.py:6 imports config.logging"]


def test_a_planted_file_in_a_copy_of_the_tree_is_found(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "fine.py").write_text("from django.db import models\n")
    (tmp_path / "core" / "bad.py").write_text("from partner_api.base import answer\n")
    (tmp_path / "partner_api").mkdir()
    (tmp_path / "partner_api" / "bad.py").write_text("import config.middleware\n")
    # Migrations are not read.
    (tmp_path / "catalog" / "migrations").mkdir(parents=True)
    (tmp_path / "catalog" / "migrations" / "0001_x.py").write_text("import orders\n")

    assert violations(tmp_path) == [
        "core/bad.py:1 imports partner_api.base",
        "partner_api/bad.py:1 imports config.middleware",
    ]
