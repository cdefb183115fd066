"""How the README test reads the examples' expected answers: a figure that drifts fails it."""

from tests.docs.shell_examples import Expected, problems, script_of, skipped

BLOCK = """\
# prose before the first command
curl -s http://127.0.0.1:8000/api/v1/partner/orders -H "X-API-Key: $API_KEY"
# 200 {"orders": [{"order_id": 2, "created_at": "2026-03-02T09:38:51+00:00", ...},
#  {"order_id": 6, ...}], "count": 2, "next_cursor": null}
# and prose after it
.venv/bin/python manage.py import_orders orders/examples/orders.json
# EX-2026-0101 9
GUNICORN_BIND=127.0.0.1:8001 DJANGO_BEHIND_PROXY=true \\
  .venv/bin/gunicorn -c gunicorn.conf.py config.wsgi &
.venv/bin/python -m connector orders pull --out inbox
# 2. the ERP imports the folder
"""

POLL = '{"orders":[{"order_id":2,"created_at":"2026-11-26T10:00:00+00:00"},{"order_id":6}],"count":2,"next_cursor":null}'


def _expected() -> tuple[str, list[Expected]]:
    expected: list[Expected] = []
    return script_of(BLOCK, 0, expected), expected


def test_answers_and_printed_lines_are_read_prose_is_not():
    script, expected = _expected()
    assert [(e.status, e.answer is not None, e.lines) for e in expected] == [
        (200, True, []),
        (None, False, ["EX-2026-0101 9"]),
    ]
    assert "and prose after it" not in expected[0].answer
    assert script.count("__expect") == 2
    # Serving is left out, continuation lines and all.
    assert "gunicorn" not in script and "connector orders pull" in script


def test_the_answer_given_passes():
    _, expected = _expected()
    assert problems(expected[0], POLL, "@@HTTP 200@@") == []
    assert problems(expected[1], "EX-2026-0101 9\nEX-2025-0950 10", "") == []


def test_a_count_an_id_or_a_status_that_drifts_fails():
    _, [poll, imported] = _expected()
    assert problems(poll, POLL.replace('"count":2', '"count":0'), "@@HTTP 200@@")
    assert problems(poll, POLL.replace('"order_id":6', '"order_id":8'), "@@HTTP 200@@")
    assert problems(poll, POLL, "@@HTTP 201@@")
    assert problems(imported, "EX-2026-0101 5\nEX-2025-0950 6", "")


def test_an_answer_shown_whole_must_be_the_whole_answer():
    expected = Expected(0, None, '[3, ["DEMO-2026-0002", "DEMO-2026-0003", "SHOP-2026-0102"]]')
    assert problems(expected, '[3,["DEMO-2026-0002","DEMO-2026-0003","SHOP-2026-0102"]]', "") == []
    assert problems(expected, '[2,["DEMO-2026-0002","DEMO-2026-0003"]]', "")


def test_serving_commands_are_left_out():
    assert skipped("make run")
    assert skipped("nginx -p run/nginx -c run/nginx/nginx.conf")
    assert skipped("A=1 B=2 \\\n  .venv/bin/gunicorn -c gunicorn.conf.py config.wsgi &")
    assert not skipped(".venv/bin/python manage.py migrate --noinput")
