"""What is wrong with a request or a file, and the one exception that refuses it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pydantic

from core.text import NO_NUL_PATTERN

MAX_PROBLEMS_SHOWN = 50


@dataclass
class Problem:
    """One thing wrong, located inside what was sent (a body, a query, a file's records)."""

    loc: tuple[Any, ...]
    msg: str
    type: str
    input: Any = None
    ctx: dict[str, Any] | None = None

    def located(self, *prefix: Any) -> Problem:
        """The same problem, its location prefixed (e.g. with "body")."""
        return replace(self, loc=(*prefix, *self.loc))


class Refused(Exception):
    """The request or the records break a rule; nothing was applied. `problems` names each one."""

    # Where in the request the problems stand: an API answer prefixes their locations with it.
    located_in: tuple[str, ...] = ("body",)

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(p.msg for p in self.problems[:5]))

    def report(self, noun: str) -> str:
        """The refusal as a command prints it: one line per problem, named by its record."""
        return nothing_imported(
            f"{noun} {index}: {p.msg}" if (index := _record_index(p)) is not None else p.msg
            for p in self.problems
        )


def _record_index(problem: Problem) -> int | None:
    return next((part for part in problem.loc if isinstance(part, int)), None)


def nothing_imported(lines: Sequence[str] | Any) -> str:
    """The message of an import that applied nothing, listing at most 50 problems."""
    lines = list(lines)
    shown = lines[:MAX_PROBLEMS_SHOWN]
    if len(lines) > MAX_PROBLEMS_SHOWN:
        shown.append(f"... and {len(lines) - MAX_PROBLEMS_SHOWN} more")
    return "Nothing was imported. Problems:\n" + "\n".join(shown)


def problems_from_pydantic(error: pydantic.ValidationError, *, prefix: tuple = ()) -> list[Problem]:
    """pydantic's errors as problems, their locations prefixed (`("body",)`, `("query",)`)."""
    problems = []
    for err in error.errors(include_url=False):
        kind = err["type"]
        msg = err["msg"]
        ctx = err.get("ctx")
        if kind == "string_pattern_mismatch" and ctx and ctx.get("pattern") == NO_NUL_PATTERN:
            kind, msg, ctx = "string_nul_character", "String must not contain NUL characters", None
        problems.append(
            Problem(
                loc=(*prefix, *err["loc"]),
                msg=msg,
                type=kind,
                input=err.get("input") if kind != "missing" else None,
                ctx=ctx,
            )
        )
    return problems
