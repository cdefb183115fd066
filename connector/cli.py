"""Command line: `python -m connector push DOCUMENT`, `orders pull --out DIR`, `orders ack FILE`,
`orders status FILE`.

Exit status of `push`: 0 synced, 1 partial, 3 failed, 4 unchanged (no answer or key refused:
push again later), 2 the document or the command line is wrong (a draft, an invalid row, a
missing key).

Exit status of `orders pull`, `orders ack` and `orders status`: 0 done; 1 (ack, status) some
orders need a person (a conflict, an unknown order, a refused line); 2 the file or the command
line is wrong (nothing was sent); 3 (pull) the service refused the poll; 4 not finished (no
answer after every retry, or the key was refused): run it again later, which is safe.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from connector.document import DocumentInvalid, DocumentNotPosted, load_document, parse_document
from connector.order_status import (
    PARTNER_REPORTED_STATUSES,
    orders_report_status,
    parse_status_file,
)
from connector.orders import (
    DEFAULT_PAGE_SIZE,
    PAGE_SIZE_MAX,
    orders_acknowledge,
    orders_pull,
    parse_ack_file,
)
from connector.push import (
    DEFAULT_CHUNK_SIZE,
    MAX_CHUNK_SIZE,
    Chunk,
    ChunkResult,
    RetryPolicy,
    ServiceClient,
    SyncStatus,
    push_document,
)
from connector.rows import FileInvalid, LineResult, Outcome
from connector.transport import HttpTransport, Transport

EXIT_CODES = {
    SyncStatus.SYNCED: 0,
    SyncStatus.PARTIAL: 1,
    SyncStatus.FAILED: 3,
    SyncStatus.UNCHANGED: 4,
}
EXIT_USAGE = 2
ORDER_EXIT_CODES = {
    Outcome.DONE: 0,
    Outcome.ATTENTION: 1,
    Outcome.REFUSED: 3,
    Outcome.UNFINISHED: 4,
}
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


def _env_number(name: str, default: float, kind: type = int) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        raise SystemExit(f"{name} must be a number, got {value!r}") from None


def _size_option(
    command: argparse.ArgumentParser, flag: str, env: str, default: int, what: str
) -> None:
    """A whole-number option whose default the environment variable `env` may set."""
    command.add_argument(
        flag,
        type=int,
        default=int(_env_number(env, default)),
        help=f"{what} (env {env}; default %(default)s)",
    )


def _service_options(command: argparse.ArgumentParser) -> None:
    """The options every command that calls the service has."""
    command.add_argument(
        "--base-url",
        default=os.environ.get("CONNECTOR_BASE_URL", DEFAULT_BASE_URL),
        help="service root address (env CONNECTOR_BASE_URL; default %(default)s)",
    )
    command.add_argument(
        "--api-key",
        default=os.environ.get("CONNECTOR_API_KEY"),
        help="API key (env CONNECTOR_API_KEY; prefer the environment, a flag shows in ps)",
    )
    command.add_argument(
        "--timeout",
        type=float,
        default=_env_number("CONNECTOR_TIMEOUT", 120.0, float),
        help="seconds to wait for each response (env CONNECTOR_TIMEOUT; default %(default)s)",
    )
    command.add_argument(
        "--retries",
        type=int,
        default=int(_env_number("CONNECTOR_RETRIES", 5)),
        help="retries of a request after an HTTP error or timeout (env CONNECTOR_RETRIES; "
        "default %(default)s)",
    )
    command.add_argument(
        "--backoff",
        type=float,
        default=_env_number("CONNECTOR_BACKOFF", 0.5, float),
        help="first retry delay in seconds, doubled on each retry up to 30 "
        "(env CONNECTOR_BACKOFF; default %(default)s)",
    )
    command.add_argument(
        "--status-file",
        type=Path,
        help="also write the result as JSON to this file",
    )
    progress = command.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress bar (default: when standard error is a terminal)",
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show a progress bar"
    )


# The commands: "parent name" -> (the help line in the parent's list, the description).
COMMANDS: dict[str, tuple[str, str]] = {
    "push": (
        "push one posted stock document to the service",
        "Push a posted stock document (JSON or CSV) to the service and print its sync "
        "status: synced, partial, failed or unchanged. Exit status: 0 synced, 1 partial, "
        "3 failed, 4 unchanged (push again later), 2 invalid document or usage.",
    ),
    "orders": (
        "take the orders waiting for the partner system, acknowledge them, report them",
        "Pull pending orders into files; acknowledge them from a CSV; report what became "
        "of them from a CSV.",
    ),
    "orders pull": (
        "write every pending order to DIR/<order number>.json",
        "Follow the pages of the order poll and write each pending order to "
        "DIR/<order number>.json (atomically; a file already there is left alone, so a "
        "re-run is safe). Exit status: 0 done, 3 the service refused the poll, 4 not "
        "finished (no answer or key refused: pull again later), 2 usage.",
    ),
    "orders ack": (
        "acknowledge the orders of a CSV of order_id,partner_reference",
        "Acknowledge each line of a CSV with the columns order_id and partner_reference "
        "(an order_number column, a stock_booked_at column - from when the ERP's stock "
        "figures count the order, an ISO 8601 date-time - and others may stand beside "
        "them), as the ERP's import produces it. Exit status: 0 every order acknowledged (first time or repeat), "
        "1 some orders need a person (conflict, not found, refused), 4 not finished (no "
        "answer or key refused: run it again later, repeats are harmless), 2 invalid file "
        "or usage (nothing sent).",
    ),
    "orders status": (
        "report what became of orders from a CSV of order_id,status,...",
        "Report each line of a CSV with the columns order_id and status ("
        + ", ".join(PARTNER_REPORTED_STATUSES)
        + ") and optionally changed_at (ISO 8601 date-time), carrier, tracking_number, "
        "tracking_url, order_number, in the file's order; an empty cell sends nothing. "
        "A status the order already has is a repeat (only its tracking fields are "
        "replaced); one the order has moved past is reported as past. Exit status: 0 "
        "every line done (changed, repeat or past), 1 some orders need a person "
        "(conflict, not acknowledged, not found, refused), 4 not finished (no answer or "
        "key refused: run it again later, repeats are harmless), 2 invalid file or usage "
        "(nothing sent).",
    ),
}
# The commands that send the lines of an ERP's CSV.
FILE_COMMANDS = ("orders ack", "orders status")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m connector",
        description=(
            "Reference connector of the partner system: pushes posted stock documents, "
            "pulls pending orders, acknowledges them and reports what became of them."
        ),
    )
    parsers = {"": parser}
    subcommands = {}
    for path, (help_line, description) in COMMANDS.items():
        parent, _, name = path.rpartition(" ")
        if parent not in subcommands:
            dest = f"{parent}_command" if parent else "command"
            subcommands[parent] = parsers[parent].add_subparsers(dest=dest, required=True)
        parsers[path] = subcommands[parent].add_parser(
            name, help=help_line, description=description
        )

    push = parsers["push"]
    push.add_argument("document", help="document file (.json or .csv), or - for standard input")
    push.add_argument(
        "--format",
        choices=("json", "csv"),
        help="document format (default: from the file suffix; json for standard input)",
    )
    _size_option(
        push,
        "--chunk-size",
        "CONNECTOR_CHUNK_SIZE",
        DEFAULT_CHUNK_SIZE,
        f"rows per batch request, 1 to {MAX_CHUNK_SIZE} (the service's limit)",
    )
    push.add_argument("--actor", help="who pushes (sync_context.actor), e.g. a user name")
    push.add_argument(
        "--dry-run",
        action="store_true",
        help="send every chunk as a dry run: print what the push would do and every field it "
        "would change (a table on a terminal, tab-separated lines otherwise; JSON in "
        "--status-file), and apply nothing",
    )
    _service_options(push)
    pull = parsers["orders pull"]
    pull.add_argument("--out", type=Path, required=True, help="folder for the order files")
    _size_option(
        pull,
        "--limit",
        "CONNECTOR_PAGE_SIZE",
        DEFAULT_PAGE_SIZE,
        f"orders per page, 1 to {PAGE_SIZE_MAX}",
    )
    _service_options(pull)
    for path in FILE_COMMANDS:
        parsers[path].add_argument("file", help="CSV file, or - for standard input")
        _service_options(parsers[path])
    return parser


def main(
    argv: list[str] | None = None,
    *,
    transport: Transport | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
    sleep=None,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)

    def usage(message: str) -> int:
        stderr.write(f"error: {message}\n")
        return EXIT_USAGE

    if not args.api_key:
        return usage("no API key: set CONNECTOR_API_KEY or pass --api-key.")
    if args.retries < 0:
        return usage("--retries must be 0 or more.")
    if args.timeout <= 0:
        return usage("--timeout must be positive.")
    io = _IO(stdout=stdout, stderr=stderr, stdin=stdin or sys.stdin, sleep=sleep)
    transport = transport or HttpTransport()
    if args.command == "orders":
        if args.orders_command == "pull":
            return _orders_pull(args, transport, io, usage)
        if args.orders_command == "status":
            return _orders_status(args, transport, io, usage)
        return _orders_ack(args, transport, io, usage)
    return _push(args, transport, io, usage)


@dataclass
class _IO:
    stdout: TextIO
    stderr: TextIO
    stdin: TextIO
    sleep: Callable[[float], None] | None


def _client(args, transport: Transport, io: _IO, on_retry) -> ServiceClient:
    return ServiceClient(
        base_url=args.base_url,
        api_key=args.api_key,
        transport=transport,
        timeout=args.timeout,
        retry=RetryPolicy(attempts=args.retries + 1, base_delay=args.backoff),
        on_retry=on_retry,
        **({"sleep": io.sleep} if io.sleep is not None else {}),
    )


def _report(args, stdout: TextIO, result, more: str = "") -> None:
    """A command's result: its summary (and `more`) on standard output, and as JSON in the
    --status-file when there is one."""
    stdout.write(result.summary() + "\n")
    if more:
        stdout.write(more)
    if args.status_file is not None:
        data = result.as_dict()
        args.status_file.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _show_progress(args, stream: TextIO, worth_it: bool = True) -> bool:
    """--progress or --no-progress; by default a bar on a terminal, where it is `worth_it`."""
    if args.progress is None:
        return stream.isatty() and worth_it
    return args.progress


@contextlib.contextmanager
def _progress(
    show: bool, total: int | None, desc: str, stream: TextIO, unit: str = "row"
) -> Iterator[Callable[[int], object]]:
    """A function that moves a progress bar on by so many; the bar (shown when `show` and tqdm
    is there) is closed on the way out."""
    bar = _progress_bar(total, desc, stream, unit=unit) if show else None
    try:
        yield bar.update if bar is not None else _no_progress
    finally:
        if bar is not None:
            bar.close()


def _no_progress(count: int) -> None:
    pass


def _push(args, transport: Transport, io: _IO, usage) -> int:
    stdin = io.stdin
    if not 1 <= args.chunk_size <= MAX_CHUNK_SIZE:
        return usage(f"--chunk-size must be 1 to {MAX_CHUNK_SIZE}.")
    spooled = None
    try:
        if args.document == "-" and (args.format or "json") == "csv":
            # Read twice like a file (checked, then sent): standard input is kept in a
            # temporary file, not in memory.
            spooled = tempfile.NamedTemporaryFile(  # noqa: SIM115 - removed in finally
                "w", encoding="utf-8", newline="", suffix=".csv", delete=False
            )
            with spooled:
                shutil.copyfileobj(stdin, spooled, 1 << 16)
            document = load_document(spooled.name, fmt="csv")
        elif args.document == "-":
            document = parse_document(stdin.read(), fmt=args.format or "json")
        else:
            document = load_document(args.document, fmt=args.format)
        return _push_document(args, document, transport, io)
    except DocumentNotPosted as exc:
        return usage(f"{exc}")
    except DocumentInvalid as exc:
        return usage(f"{args.document}: {exc}")
    finally:
        if spooled is not None:
            Path(spooled.name).unlink(missing_ok=True)


def _push_document(args, document, transport: Transport, io: _IO) -> int:
    stdout, stderr = io.stdout, io.stderr

    def on_retry(chunk: Chunk, attempt: int, problem: str, wait: float) -> None:
        stderr.write(
            f"{chunk.label}: {problem}; retry {attempt} of {args.retries} in {wait:g} s "
            f"(same request_id {document.number})\n"
        )

    client = _client(args, transport, io, on_retry)
    show = _show_progress(args, stderr, document.row_count > args.chunk_size)
    with _progress(show, document.row_count, document.number, stderr) as advance:

        def on_chunk(outcome: ChunkResult) -> None:
            advance(outcome.rows)

        result = push_document(
            document,
            client=client,
            chunk_size=args.chunk_size,
            actor=args.actor,
            on_chunk=on_chunk,
            dry_run=args.dry_run,
        )
    changes = changes_text(result.changes, table=stdout.isatty()) if args.dry_run else ""
    _report(args, stdout, result, changes)
    return EXIT_CODES[result.status]


def _report_retry(stderr: TextIO, retries: int):
    def on_retry(request, attempt: int, problem: str, wait: float) -> None:
        stderr.write(f"{request.label}: {problem}; retry {attempt} of {retries} in {wait:g} s\n")

    return on_retry


def _orders_pull(args, transport: Transport, io: _IO, usage) -> int:
    if not 1 <= args.limit <= PAGE_SIZE_MAX:
        return usage(f"--limit must be 1 to {PAGE_SIZE_MAX}.")
    if args.out.exists() and not args.out.is_dir():
        return usage(f"{args.out} is not a folder.")
    client = _client(args, transport, io, _report_retry(io.stderr, args.retries))

    def on_file(path: str) -> None:
        io.stdout.write(f"wrote {path}\n")

    # How many orders wait is not known before the last page: the bar counts without a total.
    with _progress(_show_progress(args, io.stderr), None, "orders", io.stderr, "order") as advance:
        try:
            result = orders_pull(
                client=client,
                folder=args.out,
                page_size=args.limit,
                on_file=on_file,
                on_page=advance,
            )
        except OSError as exc:
            return usage(f"cannot write to {args.out}: {exc}")
    _report(args, io.stdout, result)
    return ORDER_EXIT_CODES[result.outcome]


def _orders_ack(args, transport: Transport, io: _IO, usage) -> int:
    return _orders_file(
        args, transport, io, usage, parse_ack_file, orders_acknowledge, "acknowledge"
    )


def _orders_status(args, transport: Transport, io: _IO, usage) -> int:
    return _orders_file(
        args, transport, io, usage, parse_status_file, orders_report_status, "status"
    )


def _orders_file(args, transport: Transport, io: _IO, usage, parse, send, label: str) -> int:
    """Read the ERP's CSV (every problem before anything is sent), then send its lines one by
    one with progress and retries; the summary, the status file and the exit status."""
    try:
        text = io.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
        lines = parse(text)
    except (OSError, UnicodeDecodeError) as exc:
        return usage(f"cannot read {args.file}: {exc}")
    except FileInvalid as exc:
        shown = "\n  ".join(exc.problems[:20])
        more = f"\n  (+{len(exc.problems) - 20} more)" if len(exc.problems) > 20 else ""
        return usage(f"{args.file}: nothing was sent:\n  {shown}{more}")
    client = _client(args, transport, io, _report_retry(io.stderr, args.retries))
    show = _show_progress(args, io.stderr)
    with _progress(show, len(lines), label, io.stderr, "order") as advance:

        def on_line(outcome: LineResult) -> None:
            advance(1)

        result = send(lines, client=client, on_line=on_line)
    _report(args, io.stdout, result)
    return ORDER_EXIT_CODES[result.outcome]


CHANGE_COLUMNS = ("chunk", "index", "stock_code", "ean", "field", "old", "new")


def changes_text(changes: list[dict], *, table: bool) -> str:
    """A dry run's changes: an aligned table for people, tab-separated lines for programs."""
    if not changes:
        return "No field would change.\n"
    rows = [
        [
            _value(change.get(name)) if name in ("old", "new") else str(change.get(name, ""))
            for name in CHANGE_COLUMNS
        ]
        for change in changes
    ]
    if not table:
        lines = ["\t".join(CHANGE_COLUMNS)]
        lines += ["\t".join(cell.replace("\t", " ") for cell in row) for row in rows]
        return "\n".join(lines) + "\n"
    widths = [
        max(len(name), *(len(row[i]) for row in rows)) for i, name in enumerate(CHANGE_COLUMNS)
    ]

    def line(cells) -> str:
        return "  ".join(
            cell.ljust(width) for cell, width in zip(cells, widths, strict=True)
        ).rstrip()

    out = [f"Changes the push would make ({len(changes)}):", line(CHANGE_COLUMNS)]
    out.append(line(["-" * width for width in widths]))
    out += [line(row) for row in rows]
    return "\n".join(out) + "\n"


def _value(value) -> str:
    # Values in JSON spelling, so that null, true and "5" (text) are told from 5 (a number);
    # plain text stays plain.
    if isinstance(value, str) and value and value.strip() == value and not _is_json(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _progress_bar(total: int | None, number: str, stream: TextIO, *, unit: str = "row"):
    try:
        from tqdm import tqdm
    except ImportError:  # the connector still works without it, only without a bar
        return None
    # One update per chunk: no need to throttle redraws. A terminal that reports no width (a
    # bare pseudo-terminal) would get an empty bar, hence the fallback width.
    columns = shutil.get_terminal_size((80, 24)).columns
    return tqdm(
        total=total,
        desc=number,
        unit=unit,
        file=stream,
        leave=False,
        mininterval=0,
        ncols=columns,
    )
