"""Command line: `stock-sync-connector push DOCUMENT` (or `python -m connector ...` in the
checkout), `orders pull --out DIR`, `orders ack FILE`, `orders status FILE`, `orders ship FILE`.

Exit status of `push`: 0 synced, 1 partial, 3 failed, 4 unchanged (no answer: push again
later), 5 the key was refused (401, 403: no retry helps), 2 the document or the command line is
wrong (a draft, an invalid row, a missing key).

Exit status of `orders pull`, `orders ack`, `orders status` and `orders ship`: 0 done; 1 (ack,
status, ship) some
orders need a person (a conflict, an unknown order, a refused line); 2 the file or the command
line is wrong (nothing was sent); 3 (pull) the service refused the poll; 4 not finished (no
answer after every retry): run it again later, which is safe; 5 the key was refused.

Exit status of `snapshot`: 0 committed, 6 the commit is held (a person confirms the absent
count with --confirm-absent N), 2, 3, 4 and 5 as for `push`.

`--help` of each command lists the columns it reads, its exit statuses and its environment
variables; they are built from the same constants the reading uses.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from connector.document import (
    BOOLEAN_FIELDS,
    CSV_DOCUMENT_COLUMNS,
    REQUIRED_FIELDS,
    SOURCE_TYPES,
    STRING_FIELDS,
    DocumentInvalid,
    DocumentNotPosted,
    load_document,
    parse_document,
    posted_at_problem,
    warehouse_code_problem,
)
from connector.order_status import (
    PARTNER_REPORTED_STATUSES,
    STATUS_OPTIONAL,
    STATUS_REQUIRED,
    orders_report_status,
    parse_status_file,
)
from connector.orders import (
    ACK_OPTIONAL,
    ACK_REQUIRED,
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
    document_warnings,
    push_document,
)
from connector.rows import FileInvalid, LineResult, Outcome
from connector.shipments import (
    SHIP_OPTIONAL,
    SHIP_REQUIRED,
    orders_ship,
    parse_ship_file,
)
from connector.snapshot import (
    PART_SIZE,
    SnapshotStatus,
    read_snapshot_file,
    snapshot_id_problem,
    snapshot_send,
    spooled,
)
from connector.transport import HttpTransport, Transport

EXIT_CODES = {
    SyncStatus.SYNCED: 0,
    SyncStatus.PARTIAL: 1,
    SyncStatus.FAILED: 3,
    SyncStatus.UNCHANGED: 4,
}
EXIT_USAGE = 2
# The service refused the key (401 wrong, revoked or expired; 403 not a partner key).
EXIT_KEY_REFUSED = 5
# A snapshot's commit is held: a person checks the absent levels and confirms their number.
EXIT_HELD = 6
SNAPSHOT_EXIT_CODES = {
    SnapshotStatus.COMMITTED: 0,
    SnapshotStatus.HELD: EXIT_HELD,
    SnapshotStatus.FAILED: 3,
    SnapshotStatus.UNCHANGED: 4,
}
ORDER_EXIT_CODES = {
    Outcome.DONE: 0,
    Outcome.ATTENTION: 1,
    Outcome.REFUSED: 3,
    Outcome.UNFINISHED: 4,
    Outcome.KEY_REFUSED: EXIT_KEY_REFUSED,
}
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
PROG = "stock-sync-connector"


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
        "status: synced, partial, failed or unchanged. The whole document is checked before "
        "the first chunk is sent.",
    ),
    "snapshot": (
        "send a warehouse's whole stock: what the file does not name is set to 0",
        "Send a stock document as a full snapshot of one warehouse: open it, send its rows in "
        f"parts of {PART_SIZE}, commit it. The levels of the warehouse it does not name are set "
        "to 0, unless the service holds the commit (a count that differs, too many absent "
        "levels, a snapshot much smaller than the last): then it prints why and how many, and "
        "--confirm-absent N commits it. Running it again resumes the same snapshot. The file is "
        "a stock document as push reads it (push --help lists its columns).",
    ),
    "orders": (
        "take the orders waiting for the partner system, acknowledge them, report them",
        "Pull pending orders into files; acknowledge them from a CSV; report what became "
        "of them from a CSV; record their parcels from a CSV.",
    ),
    "orders pull": (
        "write every pending order to DIR/<order number>.json",
        "Follow the pages of the order poll and write each pending order to "
        "DIR/<order number>.json (atomically; a file already there is left alone, so a "
        "re-run is safe).",
    ),
    "orders ack": (
        "acknowledge the orders of a CSV of order_id,partner_reference",
        "Acknowledge each line of a CSV, as the ERP's import produces it. The whole file is "
        "checked first; any problem and nothing is sent.",
    ),
    "orders status": (
        "report what became of orders from a CSV of order_id,status,...",
        "Report each line of a CSV in the file's order. A status the order already has is a "
        "repeat (only its tracking fields are replaced); one the order has moved past is "
        "reported as past. The whole file is checked first; any problem and nothing is sent.",
    ),
    "orders ship": (
        "record the parcels of orders from a CSV of order_id,shipment_id,line,quantity,...",
        "Record each parcel of a CSV (the rows with the same order_id and shipment_id are one "
        "parcel), in the order the file first names them. A parcel the service already has "
        "is a repeat (only the fields the file fills in are replaced, a delivery time "
        "added, say); units over what was ordered, or another parcel under the same "
        "shipment_id, need a person. The whole file is checked first; any problem and "
        "nothing is sent.",
    ),
}
# The commands that send the lines of an ERP's CSV.
FILE_COMMANDS = ("orders ack", "orders status", "orders ship")

HELP_WIDTH = 88
KEY_REFUSED_LINE = (
    "the API key was refused (HTTP 401: wrong, revoked or expired; HTTP 403: not a partner "
    "key): no retry helps; set CONNECTOR_API_KEY to a valid partner key"
)
USAGE_LINE = "the command line, the document or the file is wrong: nothing was sent"
NO_ANSWER_LINE = (
    "not finished: no answer after every retry; run the same command again later (safe: "
    "the service replays what it already applied)"
)
EXIT_STATUSES: dict[str, list[tuple[int, str]]] = {
    "": [
        (0, "done (push: synced)"),
        (
            1,
            "push: partial (keys unknown to the shop); orders ack/status/ship: some orders "
            "need a person",
        ),
        (EXIT_USAGE, USAGE_LINE),
        (
            3,
            "push: failed (the service refused a chunk); orders pull: the service refused the "
            "poll; snapshot: the service refused a call",
        ),
        (4, NO_ANSWER_LINE),
        (EXIT_KEY_REFUSED, KEY_REFUSED_LINE),
        (EXIT_HELD, "snapshot: the commit is held; confirm the absent count with --confirm-absent"),
    ],
    "push": [
        (0, "synced: every row applied (or stale: a later document already set it)"),
        (1, "partial: some keys match no product of the shop (kept as pending keys for staff)"),
        (
            EXIT_USAGE,
            "the document or the command line is wrong (a draft, an invalid row): nothing was sent",
        ),
        (3, "failed: the service refused a chunk; no further chunk was sent"),
        (
            4,
            "unchanged: no answer after every retry; push the document again later (the "
            "service replays the chunks it already applied)",
        ),
        (EXIT_KEY_REFUSED, "unchanged: " + KEY_REFUSED_LINE),
    ],
    "snapshot": [
        (0, "committed (now, or by an earlier run)"),
        (EXIT_USAGE, USAGE_LINE),
        (
            3,
            "failed: the service refused a call (another snapshot under the id, an unknown "
            "warehouse, an expired or abandoned snapshot); nothing more was sent",
        ),
        (4, NO_ANSWER_LINE),
        (EXIT_KEY_REFUSED, KEY_REFUSED_LINE),
        (
            EXIT_HELD,
            "held: nothing was zeroed; the reasons, the absent count and the first absent "
            "levels are printed; check them, then run it again with --confirm-absent N",
        ),
    ],
    "orders pull": [
        (0, "every pending order is in DIR"),
        (EXIT_USAGE, "usage (a bad --limit, DIR is a file)"),
        (3, "the service refused the poll"),
        (4, NO_ANSWER_LINE + "; files already written stay"),
        (EXIT_KEY_REFUSED, KEY_REFUSED_LINE),
    ],
}
EXIT_STATUSES["orders ack"] = EXIT_STATUSES["orders status"] = EXIT_STATUSES["orders ship"] = [
    (
        0,
        "every line done: taken (acknowledged, changed, recorded), a repeat, or (status) past",
    ),
    (
        1,
        "some orders need a person (a conflict, units over (ship), an unknown order, a "
        "refused line)",
    ),
    (
        EXIT_USAGE,
        "the file is invalid or unreadable, or the command line is wrong: nothing was sent",
    ),
    (4, NO_ANSWER_LINE),
    (EXIT_KEY_REFUSED, KEY_REFUSED_LINE + "; the lines from the refused one on were not sent"),
]
# Environment variables: (name, option, what, default, the command that alone reads it or "").
ENVIRONMENT = (
    ("CONNECTOR_BASE_URL", "--base-url", "service root", DEFAULT_BASE_URL, ""),
    (
        "CONNECTOR_API_KEY",
        "--api-key",
        "the partner API key; prefer it to the flag, which ps shows",
        "",
        "",
    ),
    ("CONNECTOR_TIMEOUT", "--timeout", "seconds to wait for each response", "120", ""),
    ("CONNECTOR_RETRIES", "--retries", "retries after an HTTP error or a timeout", "5", ""),
    ("CONNECTOR_BACKOFF", "--backoff", "first retry delay in seconds, doubled up to 30", "0.5", ""),
    (
        "CONNECTOR_CHUNK_SIZE",
        "--chunk-size",
        f"rows per batch request, 1 to {MAX_CHUNK_SIZE}",
        str(DEFAULT_CHUNK_SIZE),
        "push",
    ),
    (
        "CONNECTOR_PAGE_SIZE",
        "--limit",
        f"orders per page, 1 to {PAGE_SIZE_MAX}",
        str(DEFAULT_PAGE_SIZE),
        "orders pull",
    ),
)


def _fill(text: str, indent: str = "", first: str | None = None) -> str:
    return textwrap.fill(
        text,
        HELP_WIDTH,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_on_hyphens=False,
    )


def _names(names) -> str:
    return ", ".join(names)


def _columns_help(required: list[str], optional: list[str], intro: str, outro: str) -> str:
    lines = [_fill(intro), "  required columns:"]
    lines += [_fill(item, "      ", "    ") for item in required]
    lines.append("  optional columns:")
    lines += [_fill(item, "      ", "    ") for item in optional]
    lines.append(_fill(outro, "  "))
    return "\n".join(lines)


CSV_INTRO = (
    "the {noun}, CSV: a header line naming the columns, then one {what} per line; UTF-8 (a BOM "
    "is allowed), separated by commas or by semicolons (as a spreadsheet saves it; read from "
    "the header line)."
)


def _push_columns_help() -> str:
    types = ", ".join(name for name in SOURCE_TYPES if "_" not in name)
    return "\n".join(
        [
            _fill(
                'the document, JSON: {"number": "PR-2026-0042", "type": "receipt", "state": '
                '"posted", "posted_at": "2026-01-31T08:00:00+01:00", "rows": [{"stock_code": '
                '"PT-1", "status": "active", "shop_quantity": 12, "catalog_price": 89.9, '
                '"eshop_price": 84.5}, ...]}; a row has the fields the CSV columns below name.'
            ),
            "",
            _columns_help(
                [
                    f"{_names(CSV_DOCUMENT_COLUMNS)}: the same on every line; the type is "
                    f"{types} (or its source type), the state posted or draft (a draft is "
                    "never sent)",
                    f"{_names(REQUIRED_FIELDS)}: the item (shop_quantity a whole number, the "
                    "prices non-negative numbers with a decimal point)",
                ],
                [
                    "posted_at (or document_posted_at): when the document was posted in the "
                    "ERP, an ISO 8601 date-time such as 2026-01-31T08:00:00+01:00, the same on "
                    "every line (or give it with --posted-at)",
                    "warehouse: the code of the warehouse whose level the row's shop_quantity "
                    "is (1 to 32 characters of A-Z a-z 0-9 . _ -); empty: the warehouse "
                    "--warehouse names, or without it the service's default warehouse. A "
                    "document has one row per item and warehouse; an item's rows for several "
                    "warehouses must agree on its prices, status and other fields",
                    f"ean, {_names(name for name in STRING_FIELDS if name != 'ean')}: text",
                    f"{_names(BOOLEAN_FIELDS)}: true or false (also yes/no, 1/0)",
                    "weight_kg: a number (a decimal comma is allowed)",
                ],
                CSV_INTRO.format(noun="document", what="document row"),
                "An empty cell is not sent: the service keeps what it has. A column (or a JSON "
                "row's field) that narrowly misses one above (warehose, Shop Quantity) refuses "
                "the document, naming the one meant; any other is named in a warning and not "
                "sent.",
            ),
            "",
            _fill(
                "posted_at: send it with every document. Without it the service dates the "
                "document's figures at the moment it applies them: a late retry of a figure "
                "computed before the partner system booked an order then consumes that "
                "order's reservation and puts its units back on sale. The connector warns "
                "once per document that carries none."
            ),
        ]
    )


def _ack_columns_help() -> str:
    described = {
        "order_id": "order_id: the service's order id, as the pulled order file has it",
        "partner_reference": "partner_reference: the ERP's reference of the order, 1 to 64 "
        "characters",
        "order_number": "order_number: the shop's order number, for people (not sent)",
        "stock_booked_at": "stock_booked_at: from when the ERP's stock figures count the "
        "order, an ISO 8601 date-time on the ERP's clock; empty: the moment of the "
        "acknowledgement",
    }
    return _columns_help(
        [described[name] for name in ACK_REQUIRED],
        [described[name] for name in ACK_OPTIONAL],
        CSV_INTRO.format(noun="file", what="order"),
        "Other columns are passed over; one that looks like a misspelt column above is named "
        "in a warning. An order listed twice with two references is refused.",
    )


def _status_columns_help() -> str:
    described = {
        "order_id": "order_id: the service's order id",
        "status": f"status: {', '.join(PARTNER_REPORTED_STATUSES)}",
        "changed_at": "changed_at: when it happened, an ISO 8601 date-time",
        "carrier": "carrier: at most 64 characters",
        "tracking_number": "tracking_number: at most 128 characters",
        "tracking_url": "tracking_url: an absolute http or https URL, at most 500 characters",
        "order_number": "order_number: the shop's order number, for people (not sent)",
    }
    return _columns_help(
        [described[name] for name in STATUS_REQUIRED],
        [described[name] for name in STATUS_OPTIONAL],
        CSV_INTRO.format(noun="file", what="event"),
        "An empty cell sends nothing: the service keeps what it has. An order shipped then "
        "delivered may appear twice. Other columns are passed over; one that looks like a "
        "misspelt column above is named in a warning.",
    )


def _ship_columns_help() -> str:
    described = {
        "order_id": "order_id: the service's order id",
        "shipment_id": "shipment_id: the ERP's id of the parcel, 1 to 64 characters of "
        "A-Z a-z 0-9 . _ : / -; the rows of one parcel share it",
        "line": "line: the order line, by its place in the order's items (0 for the first)",
        "quantity": "quantity: units of that line in the parcel, a whole number of at least 1",
        "warehouse": "warehouse: the code of the warehouse the parcel left from",
        "shipped_at": "shipped_at: when it left, an ISO 8601 date-time; empty: when sent",
        "delivered_at": "delivered_at: when it was delivered, an ISO 8601 date-time",
        "carrier": "carrier: at most 64 characters",
        "tracking_number": "tracking_number: at most 128 characters",
        "tracking_url": "tracking_url: an absolute http or https URL, at most 500 characters",
        "order_number": "order_number: the shop's order number, for people (not sent)",
    }
    return _columns_help(
        [described[name] for name in SHIP_REQUIRED],
        [described[name] for name in SHIP_OPTIONAL],
        CSV_INTRO.format(noun="file", what="order line of a parcel"),
        "A parcel's warehouse, times and tracking may stand on any of its rows; two rows giving "
        "two values is a problem of the file. An empty cell sends nothing: the service keeps "
        "what it has. Other columns are passed over; one that looks like a misspelt column "
        "above is named in a warning.",
    )


def _exit_help(path: str) -> str:
    lines = ["exit status:"]
    lines += [_fill(text, "     ", f"  {code}  ") for code, text in EXIT_STATUSES[path]]
    return "\n".join(lines)


def _environment_help(path: str) -> str:
    rows = []
    for name, option, what, default, only in ENVIRONMENT:
        if only and path not in ("", only):
            continue
        text = f"{what} ({option}" + (f"; default {default})" if default else ")")
        rows.append((name, f"{only}: {text}" if only and not path else text))
    width = max(len(name) for name, _ in rows) + 4
    lines = ["environment (an option on the command line wins):"]
    lines += [_fill(text, " " * width, f"  {name}".ljust(width)) for name, text in rows]
    return "\n".join(lines)


def _epilog(path: str, prog: str = PROG) -> str | None:
    if path == "orders":
        return None
    parts = []
    if path == "push":
        parts.append(_push_columns_help())
    elif path == "orders ack":
        parts.append(_ack_columns_help())
    elif path == "orders status":
        parts.append(_status_columns_help())
    elif path == "orders ship":
        parts.append(_ship_columns_help())
    parts += [_exit_help(path), _environment_help(path)]
    if path == "":
        parts.append(
            _fill(
                f"{prog} COMMAND --help describes a command: the columns it reads, its exit "
                "statuses."
            )
        )
    return "\n\n".join(parts)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=_fill(
            "Reference connector of the partner system: pushes posted stock documents, "
            "pulls pending orders, acknowledges them and reports what became of them."
        ),
        epilog=_epilog("", prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parsers = {"": parser}
    subcommands = {}
    for path, (help_line, description) in COMMANDS.items():
        parent, _, name = path.rpartition(" ")
        if parent not in subcommands:
            dest = f"{parent}_command" if parent else "command"
            subcommands[parent] = parsers[parent].add_subparsers(dest=dest, required=True)
        parsers[path] = subcommands[parent].add_parser(
            name,
            help=help_line,
            description=_fill(description),
            epilog=_epilog(path),
            formatter_class=argparse.RawDescriptionHelpFormatter,
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
    push.add_argument(
        "--posted-at",
        metavar="DATETIME",
        help="when the document was posted in the ERP (sync_context.posted_at), an ISO 8601 "
        "date-time such as 2026-01-31T08:00:00+01:00, for a document that does not carry "
        "one; a document that does must carry the same",
    )
    push.add_argument(
        "--warehouse",
        metavar="CODE",
        help="the warehouse whose levels the document's rows are, for rows that name none (a "
        "row's own warehouse, a warehouse column in CSV, wins); default: the service's default "
        "warehouse",
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
    snapshot = parsers["snapshot"]
    snapshot.add_argument("file", help="stock document (.json or .csv), or - for standard input")
    snapshot.add_argument("--format", choices=("json", "csv"), help="as for push")
    snapshot.add_argument(
        "--warehouse", metavar="CODE", required=True, help="the warehouse the snapshot is of"
    )
    snapshot.add_argument(
        "--snapshot-id",
        metavar="ID",
        help="1 to 64 characters of A-Z a-z 0-9 . _ : - (default: the warehouse and a hash of "
        "the file, the warehouse and posted_at, so running it again resumes the snapshot)",
    )
    snapshot.add_argument(
        "--posted-at", metavar="DATETIME", help="as for push; a snapshot needs one"
    )
    snapshot.add_argument(
        "--confirm-absent",
        metavar="N",
        type=int,
        help="commit a held snapshot: N must be the absent count the held commit printed",
    )
    _service_options(snapshot)
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
    prog: str = PROG,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser(prog)
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
        if args.orders_command == "ship":
            return _orders_file(
                args, transport, io, usage, parse_ship_file, orders_ship, "ship", unit="parcel"
            )
        return _orders_ack(args, transport, io, usage)
    if args.command == "snapshot":
        return _snapshot(args, transport, io, usage)
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
    warehouse = args.warehouse.strip() if args.warehouse is not None else None
    if warehouse is not None and (problem := warehouse_code_problem(warehouse)):
        return usage(f"--warehouse: {problem}.")
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
            document = load_document(spooled.name, fmt="csv", warehouse=warehouse)
        elif args.document == "-":
            document = parse_document(stdin.read(), fmt=args.format or "json", warehouse=warehouse)
        else:
            document = load_document(args.document, fmt=args.format, warehouse=warehouse)
        if args.posted_at is not None:
            given = args.posted_at.strip()
            if problem := posted_at_problem(given):
                return usage(f"--posted-at: {problem.removeprefix('posted_at: ')}")
            if document.posted_at not in (None, given):
                return usage(
                    f"--posted-at {given} disagrees with the document's posted_at "
                    f"{document.posted_at}; give one of them."
                )
            document.posted_at = given
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

    for warning in document_warnings(document):
        _warn(stderr, warning)
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
    return EXIT_KEY_REFUSED if result.key_refused else EXIT_CODES[result.status]


def _snapshot(args, transport: Transport, io: _IO, usage) -> int:
    """The reading and the command line's checks, then connector.snapshot does the rest."""
    warehouse = args.warehouse.strip()
    if problem := warehouse_code_problem(warehouse):
        return usage(f"--warehouse: {problem}.")
    if args.snapshot_id is not None and (problem := snapshot_id_problem(args.snapshot_id)):
        return usage(f"--snapshot-id: {problem}.")
    if args.confirm_absent is not None and args.confirm_absent < 0:
        return usage("--confirm-absent must be 0 or more.")
    try:
        with spooled(args.file, io.stdin, args.format) as (path, fmt):
            source = read_snapshot_file(
                path, fmt=fmt, warehouse=warehouse, posted_at=args.posted_at
            )
            for warning in source.document.warnings:
                _warn(io.stderr, warning)
            client = _client(args, transport, io, _report_retry(io.stderr, args.retries))
            show = _show_progress(args, io.stderr, source.document.row_count > PART_SIZE)
            with _progress(show, source.document.row_count, "snapshot", io.stderr) as advance:
                result = snapshot_send(
                    source,
                    client=client,
                    snapshot_id=args.snapshot_id,
                    confirm_absent=args.confirm_absent,
                    on_part=lambda part: advance(part.rows),
                )
    except DocumentInvalid as exc:
        return usage(f"{args.file}: {exc}")
    _report(args, io.stdout, result)
    return EXIT_KEY_REFUSED if result.key_refused else SNAPSHOT_EXIT_CODES[result.status]


def _warn(stderr: TextIO, text: str) -> None:
    stderr.write(_fill(text, "  ", "warning: ") + "\n")


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


def _orders_file(
    args, transport: Transport, io: _IO, usage, parse, send, label: str, unit: str = "order"
) -> int:
    """Read the ERP's CSV (every problem before anything is sent), then send its lines one by
    one with progress and retries; the summary, the status file and the exit status."""
    try:
        text = io.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
        warnings: list[str] = []
        lines = parse(text, warnings)
    except (OSError, UnicodeDecodeError) as exc:
        return usage(f"cannot read {args.file}: {exc}")
    except FileInvalid as exc:
        shown = "\n  ".join(exc.problems[:20])
        more = f"\n  (+{len(exc.problems) - 20} more)" if len(exc.problems) > 20 else ""
        return usage(f"{args.file}: nothing was sent:\n  {shown}{more}")
    for warning in warnings:
        _warn(io.stderr, f"{args.file}: {warning}")
    client = _client(args, transport, io, _report_retry(io.stderr, args.retries))
    show = _show_progress(args, io.stderr)
    with _progress(show, len(lines), label, io.stderr, unit) as advance:

        def on_line(outcome: LineResult) -> None:
            advance(1)

        result = send(lines, client=client, on_line=on_line)
    _report(args, io.stdout, result)
    return ORDER_EXIT_CODES[result.outcome]


CHANGE_COLUMNS = ("chunk", "index", "stock_code", "ean", "warehouse", "field", "old", "new")


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
