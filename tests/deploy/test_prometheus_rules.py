"""The alert rules in deploy/prometheus: valid, pinned by promtool's unit tests, and written
against the metric names the service really exports (a renamed metric fails here)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from monitoring.metrics import PLACEMENT_RESULTS
from tests.environment import missing_tool_reason
from tests.monitoring.helpers import TOKEN

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason=missing_tool_reason("promtool", "prometheus")
)


def promtool(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@needs_promtool
def test_rules_are_valid():
    done = promtool("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_rules_pass_their_unit_tests():
    done = promtool("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
@pytest.mark.parametrize(
    ("metric", "alert"),
    [
        ("stock_sync_orders_oldest_waiting_age_seconds", "StockSyncOrderWaitingTooLong"),
        (
            "stock_sync_reservations_oldest_unconsumed_age_seconds",
            "StockSyncReservationNotConsumed",
        ),
        ("stock_sync_orders_placed_total", "StockSyncPlacementsShort"),
    ],
)
def test_the_unit_tests_catch_a_renamed_metric(tmp_path, metric, alert):
    rules = (RULES_DIR / "alerts.yml").read_text()
    renamed = rules.replace(metric, "stock_sync_renamed")
    (tmp_path / "alerts.yml").write_text(renamed)
    shutil.copy(RULES_DIR / "alerts_test.yml", tmp_path)
    done = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert alert in done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("original", "loosened", "alert"),
    [
        # A day, not an hour: the test that expects silence at 24 hours catches it.
        ("> 24 * 3600", "> 3600", "StockSyncReservationNotConsumed"),
        # A share, not any short placement: the busy shop's 5 % must stay quiet.
        (
            ") > 0.2\n        for: 5m\n        labels:\n          severity: warning\n        "
            'annotations:\n          summary: "Many shop orders',
            ") > 0.01\n        for: 5m\n        labels:\n          severity: warning\n        "
            'annotations:\n          summary: "Many shop orders',
            "StockSyncPlacementsShort",
        ),
    ],
)
def test_the_unit_tests_pin_the_shop_thresholds(tmp_path, original, loosened, alert):
    rules = (RULES_DIR / "alerts.yml").read_text()
    assert original in rules
    (tmp_path / "alerts.yml").write_text(rules.replace(original, loosened))
    shutil.copy(RULES_DIR / "alerts_test.yml", tmp_path)
    done = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert alert in done.stdout + done.stderr


@needs_promtool
def test_scrape_config_is_valid(tmp_path):
    config = (RULES_DIR / "prometheus.yml").read_text()
    token_file = tmp_path / "token"
    token_file.write_text("secret\n")
    config = config.replace("/etc/prometheus/stock-sync-metrics.token", str(token_file))
    (tmp_path / "prometheus.yml").write_text(config)
    shutil.copy(RULES_DIR / "alerts.yml", tmp_path)
    done = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.django_db
def test_every_metric_the_rules_use_is_exported(settings):
    settings.METRICS_TOKEN = TOKEN
    body = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    exported = set(re.findall(r"^# TYPE (\w+) ", body, flags=re.MULTILINE))
    # Counters are exported as <name>_total, the family's TYPE line names <name>.
    exported |= {f"{name}_total" for name in exported}
    used = set(re.findall(r"\bstock_sync_\w+", (RULES_DIR / "alerts.yml").read_text()))
    assert used, "the rules name no stock_sync metric"
    assert used <= exported, used - exported


def test_every_label_value_the_rules_use_is_a_real_one():
    rules = (RULES_DIR / "alerts.yml").read_text()
    outcomes = set(re.findall(r'outcome="(\w+)"', rules))
    assert outcomes <= {"applied", "replayed", "paused", "refused", "dry_run"}
    results = set(re.findall(r'orders_placed_total\{result="(\w+)"', rules))
    assert results == {"short"}
    assert results <= set(PLACEMENT_RESULTS)
