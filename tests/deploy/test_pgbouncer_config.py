"""The shipped pgbouncer configuration (deploy/pgbouncer): transaction pooling as the service
expects it, and the very file the end-to-end test runs pgbouncer with."""

import configparser
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "pgbouncer"


def _render_module():
    spec = importlib.util.spec_from_file_location("pgbouncer_render", DEPLOY / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parsed(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    parser.read_string(text)
    return parser


def test_the_template_renders_to_transaction_pooling(tmp_path):
    text = _render_module().render(
        db_host="db.internal", db_port="5432", listen_port="6432", folder=str(tmp_path)
    )
    assert "{{" not in text
    config = _parsed(text)
    bouncer = config["pgbouncer"]
    assert bouncer["pool_mode"] == "transaction"
    assert bouncer["server_reset_query"] == ""
    assert bouncer["listen_addr"] == "127.0.0.1"
    assert bouncer["auth_type"] == "scram-sha-256"
    assert "extra_float_digits" in bouncer["ignore_startup_parameters"]
    assert int(bouncer["default_pool_size"]) + int(bouncer["reserve_pool_size"]) <= 30
    assert config["databases"]["*"] == "host=db.internal port=5432"


def test_the_userlist_guidance_is_shipped():
    text = (DEPLOY / "README.md").read_text()
    assert "userlist.txt" in text
    assert "SCRAM-SHA-256$" in text


def test_the_end_to_end_pgbouncer_runs_the_shipped_template():
    source = (ROOT / "tests" / "e2e" / "pgbouncer.py").read_text()
    assert "deploy" in source and "pgbouncer" in source
    assert "pool_mode" not in source  # no configuration of its own
