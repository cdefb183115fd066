"""Render the pgbouncer configuration into a folder.

    python deploy/pgbouncer/render.py FOLDER [--db-host 127.0.0.1] [--db-port 5432]
        [--listen-addr 127.0.0.1] [--listen-port 6432] [--auth-type scram-sha-256]
    pgbouncer FOLDER/pgbouncer.ini            (as root: pgbouncer -u postgres FOLDER/pgbouncer.ini)

FOLDER gets pgbouncer.ini; userlist.txt (README.md: how to write it), the log and the pid file
are expected there too. Standard library only: it runs before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# deploy/placeholders.py: the scripts run as files (python deploy/.../render.py), not as a package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from placeholders import fill

TEMPLATE = Path(__file__).with_name("pgbouncer.ini.template")


def render(
    *,
    folder: str,
    db_host: str = "127.0.0.1",
    db_port: str = "5432",
    listen_addr: str = "127.0.0.1",
    listen_port: str = "6432",
    unix_socket_dir: str = "",
    auth_type: str = "scram-sha-256",
    admin_users: str = "postgres",
    max_client_conn: int = 500,
    default_pool_size: int = 20,
    reserve_pool_size: int = 5,
) -> str:
    values = {
        "folder": str(folder),
        "db_host": db_host,
        "db_port": str(db_port),
        "listen_addr": listen_addr,
        "listen_port": str(listen_port),
        "unix_socket_dir": unix_socket_dir,
        "auth_type": auth_type,
        "admin_users": admin_users,
        "max_client_conn": str(max_client_conn),
        "default_pool_size": str(default_pool_size),
        "reserve_pool_size": str(reserve_pool_size),
    }
    return fill(TEMPLATE, values)


def write(folder: Path, **options) -> Path:
    """Write FOLDER/pgbouncer.ini; its path."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "pgbouncer.ini"
    config.write_text(render(folder=str(folder), **options))
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="folder for pgbouncer.ini (and userlist.txt)")
    parser.add_argument("--db-host", default="127.0.0.1")
    parser.add_argument("--db-port", default="5432")
    parser.add_argument("--listen-addr", default="127.0.0.1")
    parser.add_argument("--listen-port", default="6432")
    parser.add_argument("--auth-type", default="scram-sha-256")
    parser.add_argument("--admin-users", default="postgres")
    parser.add_argument("--max-client-conn", type=int, default=500)
    parser.add_argument("--default-pool-size", type=int, default=20)
    parser.add_argument("--reserve-pool-size", type=int, default=5)
    args = parser.parse_args()
    config = write(
        args.folder,
        **{name: value for name, value in vars(args).items() if name != "folder"},
    )
    print(f"pgbouncer {config}")


if __name__ == "__main__":
    main()
