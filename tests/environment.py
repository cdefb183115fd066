"""The environment of the processes tests start: never a developer's local `.env`.

The root conftest points `DJANGO_LOCAL_ENV_FILE` at nothing for the whole run, so every
`manage.py` started by a test inherits it; tests that start processes without the shell's
settings build their environment here, which keeps that pointer.
"""

import os

LOCAL_ENV_FILE_VARIABLE = "DJANGO_LOCAL_ENV_FILE"


def no_local_env_file() -> None:
    """Make this process and its children read no `.env` (an empty file instead)."""
    os.environ[LOCAL_ENV_FILE_VARIABLE] = os.devnull


def environ_without(prefixes: tuple[str, ...], names: frozenset[str] = frozenset()) -> dict:
    """This process's environment minus variables with those prefixes or names.

    The pointer away from the local `.env` stays, whatever the prefixes say.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(prefixes) and key not in names
    }
    env[LOCAL_ENV_FILE_VARIABLE] = os.devnull
    return env
