"""The local run's settings file (`.env`, written by `make run`), read by manage.py only.

It lets every README command run as written after `make run` without repeating
`DJANGO_DEBUG=true`. Only manage.py reads it: gunicorn (config.wsgi) never does, so a file a
local run left behind cannot turn a production server into a debug one, and production still
refuses to start on the development secret key.
"""

import os
import secrets
from pathlib import Path

LOCAL_ENV_FILE = Path(__file__).resolve().parent.parent / ".env"


def load_local_env(path: Path | None = None) -> dict[str, str]:
    """Set the file's `NAME=value` lines as environment defaults; the environment wins.

    Returns what was set. A missing file sets nothing.
    """
    path = Path(os.environ.get("DJANGO_LOCAL_ENV_FILE") or path or LOCAL_ENV_FILE)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    loaded = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        name, value = name.strip(), value.strip().strip("'\"")
        if name and name not in os.environ:
            os.environ[name] = value
            loaded[name] = value
    return loaded


def local_env_text() -> str:
    """A new local `.env`: debug on, and a random secret key that survives restarts."""
    return (
        "# Written by `make run` for local use only; manage.py reads it, gunicorn never does.\n"
        "DJANGO_DEBUG=true\n"
        f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}\n"
    )


if __name__ == "__main__":
    print(local_env_text(), end="")
