"""A gunicorn worker's memory after the worst bodies it accepts and refuses.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python tests/bench/body_memory.py

For each body, a fresh gunicorn with one sync worker (the production configuration) on
127.0.0.1: the worker's resident memory (VmRSS) after a warm-up request, then after the body,
and its peak (VmHWM). A database of its own is created on the server of DATABASE_URL and
dropped at the end. Prints a Markdown table (docs/BENCHMARKS.md, "Request bodies").
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.run import full_item  # noqa: E402
from tests.e2e.reliability_harness import call, item, site  # noqa: E402

LIMIT = 16 * 1024 * 1024
MAX_JSON_VALUES = 1_000_000  # partner_api.parsers.MAX_JSON_VALUES
SYNC = "/api/v1/partner/products/sync"


def _values_body(count: int, text: str) -> bytes:
    """One valid item and a padding list: `count` JSON values in all, strings `text` long."""
    one = item("BM-00000", 1)
    strings = count - 4 - len(one)
    return (
        b'{"products": ['
        + json.dumps(one).encode()
        + b'], "padding": ['
        + b",".join([json.dumps(text).encode()] * strings)
        + b"]}"
    )


def bodies() -> list[tuple[str, bytes, int]]:
    """(what, body, expected status)."""
    widest = (LIMIT - 100) // MAX_JSON_VALUES - 3  # characters per string that still fit
    return [
        (
            "5000 full items (the largest legal batch)",
            json.dumps({"products": [full_item(i, 1) for i in range(5000)]}).encode(),
            200,
        ),
        (
            f"1,000,000 values: strings of {widest} characters (accepted)",
            _values_body(MAX_JSON_VALUES, "s" * widest),
            200,
        ),
        (
            "16 MiB of `[],` in an ignored field (5.6 M values, refused)",
            b'{"products": [], "padding": [' + b"[]," * ((LIMIT - 40) // 3) + b"[]]}",
            400,
        ),
        (
            '16 MiB of `"",` (5.6 M strings, refused)',
            b'{"products": [], "padding": [' + b'"",' * ((LIMIT - 40) // 3) + b'""]}',
            400,
        ),
        ("1,000,001 values (refused)", _values_body(MAX_JSON_VALUES + 1, "s"), 400),
        (
            "16 MiB + 1 byte (refused, 413)",
            b'{"products": [], "padding": "' + b"x" * LIMIT + b'"}',
            413,
        ),
    ]


def memory_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def main() -> None:
    # The full items come from the test factories, which need Django set up.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    import django

    django.setup()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, site(Path(tmp), "bench_bodies") as s:
        s.seed_products("BM", 1)
        for what, body, expected in bodies():
            with s.gunicorn(workers=1, name="gunicorn-memory") as server:
                call(
                    server.base_url,
                    "PUT",
                    "/api/v1/partner/products/item",
                    key=s.api_key,
                    body=item("BM-00000", 2),
                )
                [worker] = server.worker_pids()
                before = memory_mb(worker)
                reply = call(server.base_url, "POST", SYNC, key=s.api_key, raw=body)
                after = memory_mb(worker)
                assert reply.status == expected, (what, reply.status, reply.body[:300])
                rows.append((what, len(body), reply.status, before, after))
    print("| body | size | status | RSS before | RSS after | peak (VmHWM) |")
    print("|---|---|---|---|---|---|")
    for what, size, status, before, after in rows:
        print(
            f"| {what} | {size / 1048576:.1f} MiB | {status} | {before['VmRSS']:.0f} MB "
            f"| {after['VmRSS']:.0f} MB | {after['VmHWM']:.0f} MB |"
        )


if __name__ == "__main__":
    main()
