"""The service refuses to start in production mode on the public development secret key."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"


def _start(**env: str) -> subprocess.CompletedProcess:
    clean = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    return subprocess.run(
        [sys.executable, "-c", START],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_secret_key_without_debug_refuses_to_start():
    result = _start()
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY" in result.stderr


@pytest.mark.parametrize("debug", ["false", "0", ""])
def test_debug_off_spelled_any_way_still_refuses(debug):
    assert _start(DJANGO_DEBUG=debug).returncode != 0


def test_starts_with_a_secret_key():
    result = _start(DJANGO_SECRET_KEY="a-long-random-production-secret-" * 2)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_starts_in_debug_mode_with_the_development_key():
    result = _start(DJANGO_DEBUG="true")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_bad_integer_setting_refuses_to_start():
    result = _start(DJANGO_DEBUG="true", SYNC_MAX_ITEMS="lots")
    assert result.returncode != 0
    assert "SYNC_MAX_ITEMS" in result.stderr
