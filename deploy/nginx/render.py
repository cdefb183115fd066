"""Render the nginx configuration into a prefix directory.

    python deploy/nginx/render.py PREFIX [--listen 0.0.0.0:80] [--upstream 127.0.0.1:8000]
    nginx -p PREFIX -c PREFIX/nginx.conf -e stderr

PREFIX gets nginx.conf and the logs/ and tmp/ directories nginx writes to. The proxy's body
limit is MAX_REQUEST_BODY_BYTES (the service's, 16 MiB by default; read from the environment
like the service does) plus a margin, so that the service answers and audits its own 413.
Standard library only: it runs before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# deploy/placeholders.py: the scripts run as files (python deploy/.../render.py), not as a package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from placeholders import fill

TEMPLATE = Path(__file__).with_name("nginx.conf.template")
DEFAULT_MAX_BODY = 16 * 1024 * 1024
MARGIN = 1024 * 1024


def render(
    *,
    listen: str = "8080",
    upstream: str = "127.0.0.1:8000",
    max_body_bytes: int | None = None,
    worker_processes: str = "auto",
    daemon: bool = True,
    user: str | None = None,
    client_timeout: str = "10s",
    upstream_timeout: str = "130s",
) -> str:
    if max_body_bytes is None:
        max_body_bytes = int(os.environ.get("MAX_REQUEST_BODY_BYTES") or DEFAULT_MAX_BODY)
    servers = [address.strip() for address in upstream.split(",") if address.strip()]
    if not servers:
        raise ValueError("at least one upstream address is needed")
    values = {
        "listen": listen,
        "upstream_servers": "\n".join(
            f"        server {address} max_fails=0;" for address in servers
        ),
        "client_max_body_size": str(max_body_bytes + MARGIN),
        "worker_processes": worker_processes,
        "daemon": "on" if daemon else "off",
        # Started as root, nginx runs its workers as this user (nobody when unset); they write
        # the temporary files under PREFIX/tmp, so the user must be able to reach PREFIX.
        "user": f"user {user};\n" if user else "",
        # A client that sends nothing for this long gets 408 (headers and between two reads
        # of the body).
        "client_timeout": client_timeout,
        # The service's answer may take this long (above gunicorn's worker timeout); then 504.
        "upstream_timeout": upstream_timeout,
    }
    return fill(TEMPLATE, values)


def write(prefix: Path, **options) -> Path:
    """Write PREFIX/nginx.conf and create the directories nginx needs; the config's path."""
    prefix = prefix.resolve()
    for directory in ("logs", "tmp"):
        (prefix / directory).mkdir(parents=True, exist_ok=True)
    config = prefix / "nginx.conf"
    config.write_text(render(**options))
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefix", type=Path, help="directory for nginx.conf, logs/ and tmp/")
    parser.add_argument("--listen", default="8080", help="nginx's listen argument (8080)")
    parser.add_argument(
        "--upstream",
        default="127.0.0.1:8000",
        help="gunicorn's address; several app servers comma-separated (127.0.0.1:8000)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=None)
    parser.add_argument("--worker-processes", default="auto")
    parser.add_argument("--foreground", action="store_true", help="daemon off (systemd, tests)")
    parser.add_argument("--user", default=None, help="workers' user when started as root")
    parser.add_argument("--client-timeout", default="10s", help="408 after this silence (10s)")
    parser.add_argument("--upstream-timeout", default="130s", help="504 after this wait (130s)")
    args = parser.parse_args()
    config = write(
        args.prefix,
        listen=args.listen,
        upstream=args.upstream,
        max_body_bytes=args.max_body_bytes,
        worker_processes=args.worker_processes,
        daemon=not args.foreground,
        user=args.user,
        client_timeout=args.client_timeout,
        upstream_timeout=args.upstream_timeout,
    )
    print(f"nginx -p {config.parent} -c {config} -e stderr")


if __name__ == "__main__":
    main()
