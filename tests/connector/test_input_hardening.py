"""What the connector reads: it refuses, naming the line and the column, what the service would
refuse (ASCII digits, bounded exponents, no value silently rounded to zero), refuses malformed
CSV (bad quoting, duplicate columns, lines with more or fewer cells than the header), and reads a
large file in bounded memory, sending it in chunks of at most 5000 rows."""

import json
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from connector.document import DocumentInvalid, document_from_csv, document_from_dict, load_document
from connector.transport import Reply
from tests.connector.fakes import FakeService, document, run

ROOT = Path(__file__).resolve().parents[2]
HEADER = (
    "document_number,document_type,document_state,stock_code,status,shop_quantity,"
    "catalog_price,eshop_price\n"
)


@contextmanager
def deadline(seconds: int):
    """Fail instead of hanging (the old reading of `1e99999999` never ended)."""

    def expired(*_):
        raise AssertionError(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _csv(tmp_path, *lines: str, header: str = HEADER):
    path = tmp_path / "PR-1.csv"
    path.write_text(header + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _push(tmp_path, path, *extra):
    service = FakeService(known={"A-1", "A-2"})
    with deadline(20):
        code, out, err = run(["push", str(path), "--api-key", "k", *extra], service)
    return code, out, err, service


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
@pytest.mark.parametrize(
    ("price", "says"),
    [
        ("1e99999999", "exponent"),
        ("1e999999", "exponent"),
        ("1e-9999", "exponent"),
        ("1e-5", "decimal places"),
        ("0.00001", "decimal places"),
        ("12345678901", "digits before the point"),
        ("1e10", "digits before the point"),
        ("١٠٦", "ASCII"),
        ("1_000", "ASCII"),
        ("-1", "non-negative"),
        ("NaN", "number"),
        ("Infinity", "number"),
    ],
)
def test_a_price_the_service_would_refuse_is_refused_with_line_and_column(
    tmp_path, price, says, dry_run
):
    path = _csv(
        tmp_path,
        "PR-1,receipt,posted,A-1,active,1,100,90",
        f"PR-1,receipt,posted,A-2,active,1,{price},90",
    )
    started = time.monotonic()
    code, _, err, service = _push(tmp_path, path, *dry_run)
    assert time.monotonic() - started < 10
    assert code == 2, err
    assert "Traceback" not in err
    assert "line 3: catalog_price:" in err, err
    assert says in err, err
    assert service.sent == []


@pytest.mark.parametrize(
    "quantity", ["١٢", "1_000", " +7 ", "+7", "1e3", "7.5", "0x10", "٣", "99999999999", "1 000"]
)
def test_a_quantity_the_service_would_refuse_is_refused_with_line_and_column(tmp_path, quantity):
    path = _csv(tmp_path, f'PR-1,receipt,posted,A-1,active,"{quantity}",100,90')
    code, _, err, service = _push(tmp_path, path)
    assert code == 2, err
    assert "line 2: shop_quantity:" in err, err
    assert service.sent == []


@pytest.mark.parametrize(
    ("cell", "sent"),
    [
        ("89.90", 89.9),
        ("1e2", 100),
        ("0.0001", 0.0001),
        ("1234567890.1234", 1234567890.1234),
        ("1.50000", 1.5),
        (" 7 ", 7),
        ("0", 0),
        ("1E+2", 100),
    ],
)
def test_prices_the_service_accepts_are_sent_as_the_same_numbers(tmp_path, cell, sent):
    path = _csv(tmp_path, f"PR-1,receipt,posted,A-1,active,-3,{cell},90")
    code, _, err, service = _push(tmp_path, path)
    assert code == 0, err
    [request] = service.sent
    assert request.data["catalog_price"] == sent
    assert request.data["shop_quantity"] == -3
    assert f'"catalog_price":{json.dumps(sent)}' in request.body.decode()


@pytest.mark.parametrize(
    ("weight", "ok"),
    [
        ("9,5", True),
        ("9.5", True),
        ("1e-9999", False),
        ("1e99999999", False),
        ("٩", False),
        ("1_0", False),
        ("1234567", False),
        ("0.00001", False),
    ],
)
def test_a_weight_is_checked_like_the_service_checks_it(weight, ok):
    doc = document(1)
    doc["rows"][0]["weight_kg"] = weight
    if ok:
        assert document_from_dict(doc).rows[0]["weight_kg"] == weight
    else:
        with pytest.raises(DocumentInvalid, match="row 0: weight_kg:"):
            document_from_dict(doc)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            '{"number": "D", "type": "receipt", "state": "posted", "rows": '
            '[{"stock_code": "A", "status": "a", "shop_quantity": 1, "catalog_price": 1e-9999, '
            '"eshop_price": 1}]}',
            "catalog_price",
        ),
        (
            '{"number": "D", "type": "receipt", "state": "posted", "rows": '
            '[{"stock_code": "A", "status": "a", "shop_quantity": 1, "catalog_price": 1e999999, '
            '"eshop_price": 1}]}',
            "catalog_price",
        ),
        (
            '{"number": "D", "type": "receipt", "state": "posted", "rows": '
            '[{"stock_code": "A", "status": "a", "shop_quantity": 1' + "0" * 5000 + ", "
            '"catalog_price": 1, "eshop_price": 1}]}',
            "shop_quantity",
        ),
    ],
    ids=["tiny-price", "huge-price", "huge-quantity"],
)
def test_json_numbers_are_not_rounded_or_crashed_on(tmp_path, text, says):
    path = tmp_path / "D.json"
    path.write_text(text)
    with deadline(20), pytest.raises(DocumentInvalid, match=f"row 0: {says}:"):
        load_document(path)


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (['PR-1,receipt,posted,A-1,active,1,"100,90'], "line 2: not valid CSV"),
        (["PR-1,receipt,posted,A-1,active,1,100,90,extra"], "line 2: 9 cells"),
        (
            ["PR-1,receipt,posted,A-1,active,1,100,90", "PR-1,receipt,posted,A-2,active,1,100"],
            "line 3: 7 cells",
        ),
        (['PR-1,receipt,posted,A-1,active,1,"10"0,90'], "line 2: not valid CSV"),
    ],
    ids=["unterminated-quote", "extra-cell", "missing-cell", "text-after-quote"],
)
def test_a_malformed_csv_is_refused(tmp_path, lines, says):
    path = _csv(tmp_path, *lines)
    code, _, err, service = _push(tmp_path, path)
    assert code == 2, err
    assert says in err, err
    assert "Traceback" not in err
    assert service.sent == []


def test_a_duplicate_column_is_refused(tmp_path):
    path = _csv(
        tmp_path,
        "PR-1,receipt,posted,A-1,active,1,100,90,5",
        header=HEADER.rstrip("\n") + ",shop_quantity\n",
    )
    code, _, err, service = _push(tmp_path, path)
    assert code == 2
    assert "shop_quantity" in err and "more than once" in err, err
    assert service.sent == []


def test_csv_text_gets_the_same_checks():
    with pytest.raises(DocumentInvalid, match="line 2: 9 cells"):
        document_from_csv(HEADER + "PR-1,receipt,posted,A-1,active,1,100,90,x\n")


def test_duplicate_keys_are_found_across_the_whole_file(tmp_path):
    lines = [f"PR-1,receipt,posted,K-{n:05d},active,1,100,90" for n in range(12_000)]
    lines.append("PR-1,receipt,posted,K-00007,active,1,100,90")
    path = _csv(tmp_path, *lines)
    code, _, err, service = _push(tmp_path, path)
    assert code == 2
    assert "line 12002: the key (ean='', stock_code='K-00007') is already on line 9" in err, err
    assert service.sent == []


class CountingService:
    """Answers every chunk with success and keeps nothing of it but figures."""

    def __init__(self):
        self.chunks: list[int] = []
        self.bytes = 0

    def request(self, method, url, *, headers, body, timeout):
        rows = len(json.loads(body)["products"]) if method == "POST" else 1
        self.chunks.append(rows)
        self.bytes += len(body)
        answer = {
            "success": True,
            "products_received": rows,
            "products_updated": rows,
            "unknown_products": 0,
            "stale_products": 0,
        }
        if "dry_run=true" in url:
            answer |= {"dry_run": True, "changes": []}
        return Reply(
            status=200,
            body=json.dumps(answer).encode(),
            headers={"content-type": "application/json"},
        )


def _large_csv(path, megabytes: int) -> int:
    """A document of wide lines, about `megabytes` MB; its number of rows. Each line carries
    the longest name and a long column the connector does not send (a note of the ERP's), so
    that the file is large with few rows and the test stays quick."""
    header = HEADER.rstrip("\n") + ",name,brand,erp_note\n"
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(header)
        written = len(header)
        while written < megabytes * 1024 * 1024:
            line = (
                f"PR-BIG,receipt,posted,BIG-{count:07d},active,{count % 50},1{count % 1000}.5,"
                f"99,{'N' * 255},Brand,{'x' * 7500}\n"
            )
            out.write(line)
            written += len(line)
            count += 1
    return count


# Run in a process of its own: its peak resident memory, what the connector itself needs. The
# peak is the process's own memory map's high-water mark (VmHWM), new at exec: getrusage's
# ru_maxrss would carry over the forking test process's size (Linux keeps it across exec).
PUSH_AND_MEASURE = """
import json, re, sys
from connector.cli import main
from tests.connector.test_input_hardening import CountingService, _Null
service = CountingService()
args = ["push", sys.argv[1], "--api-key", "k", "--no-progress", *sys.argv[2:]]
code = main(args, transport=service, stdout=_Null(), stderr=_Null(), sleep=lambda _: None)
with open("/proc/self/status") as status:
    peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)) * 1024
print(json.dumps({"code": code, "chunks": service.chunks, "peak": peak}))
"""


def _push_and_measure(path, *extra) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PUSH_AND_MEASURE, str(path), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["push", "dry-run"])
def test_a_large_file_is_read_in_bounded_memory_and_sent_in_chunks_of_5000(tmp_path, dry_run):
    small, large = tmp_path / "PR-SMALL.csv", tmp_path / "PR-BIG.csv"
    _large_csv(small, 5)
    count = _large_csv(large, 50)
    baseline = _push_and_measure(small, *dry_run)
    measured = _push_and_measure(large, *dry_run)
    assert measured["code"] == 0
    assert measured["chunks"] == [5000] * (count // 5000) + [count % 5000]
    # Ten times the file, about the same memory: a chunk's rows and body at most, never the
    # file (the old reading: a peak of 360 MB for this 50 MB file, 120 MB for the 5 MB one).
    growth = measured["peak"] - baseline["peak"]
    assert growth < 15 * 1024 * 1024, (growth, measured, baseline)
    assert measured["peak"] < 150 * 1024 * 1024, measured


class _Null:
    """An output stream that keeps nothing."""

    def write(self, text):
        return len(text)

    def isatty(self):
        return False

    def flush(self):
        pass
