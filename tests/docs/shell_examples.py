"""The shell examples of the README and the guides it links, as the README test runs them.

A ```sh block is split into commands (a command spans its `\\` continuations, quoted
newlines and here-documents) and comment lines. A comment right after a command that starts
with an HTTP status and JSON (`# 200 {...}`) or with JSON (`# [3, ...]`) is the answer the
command's last curl (or the pipe it ends) must give; its indented continuation lines
(`#   ...`) belong to it. A comment right after a `manage.py` command lists lines the command
prints. Other comments are prose.

What an expected answer checks: the HTTP status, and every `"name": value` pair whose value
is a number, `true`, `false`, `null` or a string that is not a timestamp, in the order shown
(the answer may hold more: `...`). An expected answer without `...` must equal the answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# Lines that build, test, serve or deploy: the README test leaves them out (`make run` is what
# the test itself does; the deployment block's gunicorn has a test of its own).
SKIPPED_COMMAND = re.compile(
    r"^\s*(?:\w+=\S*\s+)*(?:make\s|\.venv/bin/gunicorn\s|nginx\s|\.venv/bin/python -m pytest\b)"
)


def skipped(command: str) -> bool:
    """Whether the README test leaves the command out (continuation lines joined)."""
    return SKIPPED_COMMAND.match(re.sub(r"\\\n\s*", " ", command)) is not None


EXPECTED_ANSWER = re.compile(r"^#\s*(?:(\d{3})\s+)?([\[{].*)$")
CONTINUATION = re.compile(r"^#\s{2,}\S")
PAIR = re.compile(r'"([A-Za-z_]\w*)":\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null)')
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


@dataclass
class Expected:
    """What one command must answer or print."""

    index: int
    status: int | None = None
    answer: str | None = None  # expected JSON text (maybe with `...`)
    lines: list[str] = field(default_factory=list)  # printed lines (manage.py)


@dataclass
class Unit:
    kind: str  # "command", "comment" or "blank"
    text: str


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def units(block: str) -> list[Unit]:
    """The block's commands, comment lines and blank lines, in order."""
    lines = block.splitlines()
    found: list[Unit] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            found.append(Unit("blank", line))
            i += 1
            continue
        if line.lstrip().startswith("#"):
            found.append(Unit("comment", line.strip()))
            i += 1
            continue
        command = [line]
        heredocs: list[str] = []
        state = _scan(line, "", heredocs)
        i += 1
        while (state or command[-1].endswith("\\")) and i < len(lines):
            command.append(lines[i])
            state = _scan(lines[i], state, heredocs)
            i += 1
        for delimiter in heredocs:
            while i < len(lines):
                command.append(lines[i])
                i += 1
                if lines[i - 1].strip() == delimiter:
                    break
        found.append(Unit("command", "\n".join(command)))
    return found


def _scan(line: str, state: str, heredocs: list[str]) -> str:
    """The quoting state at the end of `line` ("", "'" or '"'), noting here-documents begun."""
    j = 0
    while j < len(line):
        char = line[j]
        if state == "'":
            if char == "'":
                state = ""
        elif state == '"':
            if char == "\\":
                j += 1
            elif char == '"':
                state = ""
        elif char == "\\":
            j += 1
        elif char in "'\"":
            state = char
        elif char == "#" and (j == 0 or line[j - 1].isspace()):
            break
        elif line.startswith("<<", j):
            here = HEREDOC.match(line, j)
            if here:
                heredocs.append(here[2])
                j = here.end() - 1
        j += 1
    return state


def script_of(block: str, number: int, expected: list[Expected]) -> str:
    """The block as bash runs it: skipped commands left out, a marker before each expected
    answer (appended to `expected`) and at the block's start."""
    out = [f"__block {number}"]
    previous: Unit | None = None  # the unit before, as far as answers go
    pending: Expected | None = None  # the expected answer being read
    for unit in units(block):
        if unit.kind == "comment" and pending is not None:
            if pending.answer is None or CONTINUATION.match(unit.text):
                _continue(pending, unit.text)
                continue
            pending = None  # prose after an answer
        elif unit.kind == "comment" and previous is not None and previous.kind == "command":
            pending = _start(unit.text, previous, len(expected))
            if pending is not None:
                expected.append(pending)
                out.append(f"__expect {pending.index}")
        elif unit.kind == "command":
            pending = None
            if skipped(unit.text):
                previous = None
                continue
            out.append(unit.text)
        else:
            pending = None
        previous = unit
    return "\n".join(out) + "\n"


def _start(comment: str, command: Unit, index: int) -> Expected | None:
    answer = EXPECTED_ANSWER.match(comment)
    if answer:
        return Expected(index, int(answer[1]) if answer[1] else None, answer[2])
    if "manage.py" in command.text:
        return Expected(index, lines=[comment.removeprefix("#").strip()])
    return None


def _continue(pending: Expected, comment: str) -> None:
    if pending.answer is not None:
        pending.answer += " " + comment.removeprefix("#").strip()
    else:
        pending.lines.append(comment.removeprefix("#").strip())


PRELUDE = r"""
# curl fails on an HTTP error status (still showing the body) and reports each status on
# standard error; markers split the output by block and by expected answer.
curl() { command curl --fail-with-body -w '%{stderr}@@HTTP %{http_code}@@\n' "$@"; }
__block() { printf '\n@@BLOCK %s@@\n' "$1"; printf '\n@@BLOCK %s@@\n' "$1" >&2; }
__expect() { printf '\n@@EXPECT %s@@\n' "$1"; printf '\n@@EXPECT %s@@\n' "$1" >&2; }
"""


def segments(output: str) -> dict[int, str]:
    """The output before each `@@EXPECT n@@` marker, since the marker before it."""
    found: dict[int, str] = {}
    current: list[str] = []
    for line in output.splitlines():
        marker = re.fullmatch(r"@@(BLOCK|EXPECT) (\d+)@@", line)
        if marker:
            if marker[1] == "EXPECT":
                found[int(marker[2])] = "\n".join(current)
            current = []
        else:
            current.append(line)
    return found


def last_block(output: str) -> int | None:
    blocks = re.findall(r"^@@BLOCK (\d+)@@$", output, flags=re.MULTILINE)
    return int(blocks[-1]) if blocks else None


def last_json(text: str):
    """The last JSON value in `text` (answers may be preceded by other output)."""
    decoder = json.JSONDecoder()
    values, i = [], 0
    while i < len(text):
        if text[i] in "[{":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            values.append(value)
            i = end
        else:
            i += 1
    if not values:
        raise AssertionError(f"no JSON answer in:\n{text[-1000:]}")
    return values[-1]


def _flatten(value, into: list[tuple[str, object]]) -> list[tuple[str, object]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                _flatten(item, into)
            else:
                into.append((key, item))
    elif isinstance(value, list):
        for item in value:
            _flatten(item, into)
    return into


def _same(a, b) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def problems(expected: Expected, stdout: str, stderr: str) -> list[str]:
    """What differs between the expected answer and the one the command gave."""
    found = []
    if expected.answer is None:
        printed = iter(line.strip() for line in stdout.splitlines())
        for line in expected.lines:
            if not any(line == got for got in printed):
                found.append(f"printed no line {line!r} (in order):\n{stdout[-1500:]}")
                break
        return found
    if expected.status is not None:
        statuses = re.findall(r"@@HTTP (\d{3})@@", stderr)
        if not statuses or int(statuses[-1]) != expected.status:
            found.append(f"status {statuses[-1:] or 'none'}, expected {expected.status}")
    answer = last_json(stdout)
    try:
        whole = json.loads(expected.answer)
    except ValueError:
        whole = None
    if whole is not None:
        if whole != answer:
            found.append(f"answered {json.dumps(answer)}, expected {expected.answer}")
        return found
    actual = _flatten(answer, [])
    position = 0
    for key, raw in PAIR.findall(expected.answer):
        value = json.loads(raw)
        if isinstance(value, str) and (TIMESTAMP.match(value) or value == "..."):
            continue
        while position < len(actual) and not (
            actual[position][0] == key and _same(actual[position][1], value)
        ):
            position += 1
        if position == len(actual):
            found.append(f'"{key}": {raw} not in the answer (in order): {json.dumps(answer)}')
            break
        position += 1
    return found
