"""The production serving defaults: gunicorn listens on loopback unless told otherwise (only the
proxy on the same host reaches it, so nobody can go past nginx and spoof X-Forwarded-For), and
nginx hands the service exactly the address it saw."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gunicorn_settings(tmp_path, **env: str) -> dict:
    """gunicorn.conf.py's values, read as gunicorn reads the file, with this environment."""
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GUNICORN_") and key not in {"PORT", "WEB_CONCURRENCY"}
    }
    clean["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "metrics")
    code = (
        "import json, runpy; c = runpy.run_path('gunicorn.conf.py'); "
        "print(json.dumps({k: c[k] for k in ('bind', 'forwarded_allow_ips', "
        "'limit_request_line', 'limit_request_field_size', 'limit_request_fields')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_gunicorn_binds_loopback_by_default(tmp_path):
    assert _gunicorn_settings(tmp_path)["bind"] == "127.0.0.1:8000"
    assert _gunicorn_settings(tmp_path, PORT="9000")["bind"] == "127.0.0.1:9000"


@pytest.mark.parametrize("bind", ["unix:/run/stock-sync/gunicorn.sock", "0.0.0.0:8000"])
def test_an_explicit_bind_is_the_operator_s_choice(tmp_path, bind):
    assert _gunicorn_settings(tmp_path, GUNICORN_BIND=bind)["bind"] == bind


def test_gunicorn_accepts_every_request_head_nginx_lets_through(tmp_path):
    values = _gunicorn_settings(tmp_path)
    config = (ROOT / "deploy" / "nginx" / "nginx.conf.template").read_text()
    assert "large_client_header_buffers 4 8k;" in config
    assert values["limit_request_line"] >= 8190
    assert values["limit_request_field_size"] >= 8192
    # 32 KiB of headers hold at most about 6,500 header lines ("a:b" and CRLF).
    assert values["limit_request_fields"] >= 32 * 1024 // 5


def test_nginx_sets_x_forwarded_for_to_the_address_it_saw():
    config = (ROOT / "deploy" / "nginx" / "nginx.conf.template").read_text()
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in config
    assert "$proxy_add_x_forwarded_for" not in config
