"""A PostgreSQL server of the benchmark's own, configured as docs/DEPLOYMENT.md says.

The machine's shared server runs with PostgreSQL's defaults (128 MB of shared_buffers), which
hold a small catalogue only. A benchmark that measures the service on a large catalogue starts
this one instead: its own cluster in a folder of its own (kept between runs, so a large
database built once can be reused), on a free loopback port, with the memory and checkpoint
settings of the deployment guide, started and stopped by PID. Debian's PostgreSQL binaries;
the server runs as the `postgres` user when the benchmark runs as root (PostgreSQL refuses
root), else as the benchmark's own user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from tests.e2e.live_service import free_port

DEFAULT_DIR = Path(os.environ.get("BENCH_PG_DIR", "/var/tmp/stock-sync-bench-pg"))
SERVER_USER = "postgres"


def memory_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("MemTotal not in /proc/meminfo")


def production_settings() -> dict[str, str]:
    """docs/DEPLOYMENT.md, "PostgreSQL": a quarter of the memory for shared_buffers, the
    planner told about the rest, checkpoints far enough apart that a batch's pages are not
    written to the WAL whole after every one of them."""
    memory_mb = memory_bytes() // (1024 * 1024)
    return {
        "shared_buffers": f"{memory_mb // 4}MB",
        "effective_cache_size": f"{memory_mb * 3 // 4}MB",
        "max_wal_size": "8GB",
        "checkpoint_timeout": "15min",
        "maintenance_work_mem": "1GB",
    }


def _binaries() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not versions:
        raise SystemExit("Debian's PostgreSQL server binaries are not installed")
    return versions[-1].parent


def _as_server_user(*command: str) -> subprocess.CompletedProcess:
    """Run a server command; as the `postgres` user when this runs as root (the server
    refuses root), else as whoever runs the benchmark."""
    demote = None
    if os.getuid() == 0:
        user = pwd.getpwnam(SERVER_USER)

        def demote() -> None:
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

    return subprocess.run(command, check=True, capture_output=True, text=True, preexec_fn=demote)


@contextlib.contextmanager
def own_server(folder: Path = DEFAULT_DIR) -> Iterator[str]:
    """Start the benchmark's server (its cluster made on first use) and yield a URL of its
    `postgres` database; stop it afterwards."""
    bin_dir = _binaries()
    data = folder / "data"
    folder.mkdir(parents=True, exist_ok=True)
    if os.getuid() == 0:
        # Run as root (CI): the folder is the server user's; anyone else runs it as themselves.
        user = pwd.getpwnam(SERVER_USER)
        os.chown(folder, user.pw_uid, user.pw_gid)
    if not (data / "PG_VERSION").exists():
        if data.exists():
            shutil.rmtree(data)  # an initdb that did not finish
        _as_server_user(str(bin_dir / "initdb"), "-D", str(data), "-U", SERVER_USER, "--auth=trust")
    port = free_port()
    options = " ".join(f"-c {name}={value}" for name, value in production_settings().items())
    log = folder / "server.log"
    _as_server_user(
        str(bin_dir / "pg_ctl"),
        "start",
        "-D",
        str(data),
        "-w",
        "-t",
        "120",
        "-l",
        str(log),
        "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 {options}",
    )
    pid = int((data / "postmaster.pid").read_text().split()[0])
    try:
        yield f"postgres://{SERVER_USER}@127.0.0.1:{port}/postgres"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 2)  # SIGINT: PostgreSQL's fast shutdown
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)


@contextlib.contextmanager
def own_server_for(url: str) -> Iterator[str]:
    """`own_server`, its settings printed, and `url` moved onto it: the same database name."""
    with own_server() as own:
        settings = ", ".join(f"{name} {value}" for name, value in production_settings().items())
        print(f"# the benchmark's own PostgreSQL server (docs/DEPLOYMENT.md): {settings}")
        yield urlunparse(urlparse(own)._replace(path=urlparse(url).path))
