"""The environment of the processes tests start: never a developer's local `.env`.

The root conftest points `DJANGO_LOCAL_ENV_FILE` at nothing for the whole run, so every
`manage.py` started by a test inherits it; tests that start processes without the shell's
settings build their environment here, which keeps that pointer.
"""

import os
import shutil

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


# Tools the README does not install (Debian packages). A test that needs one skips with how to
# get it; `.ci/run` installs them all and sets REQUIRE_TOOLS=1, which makes such a skip a
# failure (root conftest), so CI never passes by skipping them.
REQUIRE_TOOLS_VARIABLE = "REQUIRE_TOOLS"
HOW_TO_GET = "apt-get install"


def tools_required() -> bool:
    """True when a missing tool must fail the test instead of skipping it (CI)."""
    return os.environ.get(REQUIRE_TOOLS_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def missing_tool_reason(tool: str, package: str) -> str:
    """The skip message of a test that needs `tool`: what is missing and how to get it."""
    return (
        f"{tool} is not installed; get it with `{HOW_TO_GET} {package}` "
        f"(.ci/run installs it; {REQUIRE_TOOLS_VARIABLE}=1 makes this skip a failure)"
    )


def is_missing_tool_skip(reason: str) -> bool:
    """Whether a skip's reason is a missing tool's (they all say how to get it)."""
    return HOW_TO_GET in reason


def needs_tool(tool: str, package: str, *, path: str | None = None):
    """A skipif marker for a test that runs `tool` (found on PATH, or at `path`)."""
    import pytest

    found = os.access(path, os.X_OK) if path else shutil.which(tool) is not None
    return pytest.mark.skipif(not found, reason=missing_tool_reason(tool, package))


def require_tool(tool: str, package: str) -> str:
    """The path of `tool`; skips the running test when it is missing (fails under
    REQUIRE_TOOLS=1: the root conftest turns the skip into a failure)."""
    import pytest

    found = shutil.which(tool)
    if found is None:
        pytest.skip(missing_tool_reason(tool, package))
    return found
