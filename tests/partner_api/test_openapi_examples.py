"""The OpenAPI document's examples are real calls: every operation that takes a body (and the two
reads, the orders poll and the shop's order) documents at least one call (its request body, its
path and query values and its answer, under one name: `schema_extensions.documented_call`), and
each documented call, sent to the service as written, gets the documented status and answer.
Swagger UI's "Try it out" starts from it.

The service holds the `demo` command's data with the ids of a fresh `make run`, so that the
documented path values (`order_id`) and the plant's `id` name the demo's records.

Times: the examples carry only document times in the past (`stock_booked_at`, `changed_at`,
which are refused only when more than 10 minutes ahead), and the placement leaves `created_at`
out (it defaults to now; one more than 24 hours old is refused). A sync's `posted_at` is the
moment the document was generated (`partner_api/documented_times.py`), so that no figure sent
before, such as the one of the curl line `make run` prints, makes it stale. So the examples
hold whatever day this runs, and the test substitutes nothing: it sends them as documented.
"""

import io
import json
import os
import re
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection, transaction
from jsonschema import Draft202012Validator
from rest_framework.test import APIClient

from partner_api.management.commands.demo import demo_seeds

SCHEMA_URL = "/api/schema/"
JSON = "application/json"
# Every operation that takes a body; the first test checks that the document has no other.
OPERATIONS_WITH_A_BODY = (
    # A snapshot's calls in the order a partner system makes them, and first: Swagger UI's
    # test executes them so, each operation's first call (its commit held, nothing zeroed),
    # before the other operations' figures, which carry the same document time.
    "stock_snapshots_open",
    "stock_snapshots_items",
    "stock_snapshots_commit",
    "products_sync",
    "products_item",
    "orders_acknowledge",
    "orders_status",
    "orders_shipments",
    "shop_stock_query",
    "shop_orders_place",
    "shop_orders_cancel",
    "plant_update",
)
# And those that take none but document a call (parameters and answer) all the same.
DOCUMENTED_OPERATIONS = (
    *OPERATIONS_WITH_A_BODY,
    "orders_poll",
    "shop_orders_get",
    "stock_snapshots_get",
    "stock_snapshots_absent",
)
# Fields whose value is the moment the service stored something: any date-time will do. (A
# snapshot's posted_at is the moment the document was generated: see FOLLOWS.)
STORED_TIMES = frozenset(
    {"created_at", "status_changed_at", "opened_at", "expires_at", "committed_at", "posted_at"}
)
# The operations that act on what others made: their documented calls follow the first
# documented call of each of these, in this order (a snapshot is opened, its part sent).
FOLLOWS = {
    "stock_snapshots_items": ("stock_snapshots_open",),
    "stock_snapshots_get": ("stock_snapshots_open",),
    "stock_snapshots_absent": ("stock_snapshots_open", "stock_snapshots_items"),
    "stock_snapshots_commit": ("stock_snapshots_open", "stock_snapshots_items"),
}


def fetch_document(client) -> dict:
    response = client.get(SCHEMA_URL, HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def document(client, db) -> dict:
    return fetch_document(client)


def operations(document: dict) -> dict[str, tuple[str, str, dict]]:
    """Each operation by its id: (path, method, operation object)."""
    return {
        operation["operationId"]: (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }


def media(entry: dict) -> dict:
    return entry.get("content", {}).get(JSON, {})


def documented_calls(operation: dict) -> list[dict]:
    """The operation's calls: each name under which it documents a request body (or, for an
    operation without one, parameter values) and an answer, with its body (None without one),
    its path and query values and the one response (status and example) of that name."""
    answers: dict[str, list] = {}
    for status, response in operation["responses"].items():
        for name, example in media(response).get("examples", {}).items():
            answers.setdefault(name, []).append((int(status), example["value"]))
    bodies = media(operation.get("requestBody", {})).get("examples", {})
    parameters = operation.get("parameters", [])
    # Named by its body's example; without a body, by its parameters' examples that an answer
    # shares (the others are single values to try).
    names = list(bodies) or [
        name
        for parameter in parameters
        for name in parameter.get("examples", {})
        if name in answers
    ]
    calls = []
    for name in dict.fromkeys(names):
        assert len(answers.get(name, [])) == 1, (operation["operationId"], name, answers)
        ((status, answer),) = answers[name]
        values = {
            location: {
                parameter["name"]: parameter.get("examples", {}).get(name, {}).get("value")
                for parameter in parameters
                if parameter["in"] == location
            }
            for location in ("path", "query")
        }
        calls.append(
            {
                "name": name,
                "body": bodies[name]["value"] if name in bodies else None,
                "path_values": values["path"],
                "query": {
                    key: value for key, value in values["query"].items() if value is not None
                },
                "status": status,
                "answer": answer,
            }
        )
    return calls


def test_every_operation_with_a_body_documents_a_call(document):
    """A request body made up from the schema is what a user of Swagger UI would otherwise
    send: random text where a stock code goes, -2147483648 units."""
    with_a_body = {
        operation_id
        for operation_id, (_, _, operation) in operations(document).items()
        if "requestBody" in operation
    }
    assert with_a_body == set(OPERATIONS_WITH_A_BODY)
    for operation_id in DOCUMENTED_OPERATIONS:
        _, _, operation = operations(document)[operation_id]
        calls = documented_calls(operation)
        assert calls, f"{operation_id} documents no call"
        for call in calls:
            if operation_id in OPERATIONS_WITH_A_BODY:
                # `{}` is a body too (a commit without a confirmation).
                assert call["body"] is not None, (operation_id, call["name"])
            assert call["answer"], (operation_id, call["name"])
            missing = [name for name, value in call["path_values"].items() if value is None]
            assert not missing, f"{operation_id} {call['name']}: no example of {missing}"


def schema_errors(document: dict, schema: dict, value) -> list[str]:
    """What is wrong with `value` by `schema`, whose references ("#/components/...") point
    into the document's components."""
    checker = Draft202012Validator({**schema, "components": document["components"]})
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in checker.iter_errors(value)
    ]


def test_every_example_fits_its_schema(document):
    """Request bodies, path values and answers: each example is valid by the schema of the
    place it documents (Swagger UI sends what the document shows)."""
    problems = []
    for operation_id, (_, _, operation) in operations(document).items():
        body = media(operation.get("requestBody", {}))
        for name, example in body.get("examples", {}).items():
            for error in schema_errors(document, body["schema"], example["value"]):
                problems.append(f"{operation_id} request {name}: {error}")
        for parameter in operation.get("parameters", []):
            for name, example in parameter.get("examples", {}).items():
                for error in schema_errors(document, parameter["schema"], example["value"]):
                    problems.append(f"{operation_id} {parameter['name']} {name}: {error}")
        for status, response in operation["responses"].items():
            content = media(response)
            for name, example in content.get("examples", {}).items():
                for error in schema_errors(document, content["schema"], example["value"]):
                    problems.append(f"{operation_id} {status} {name}: {error}")
    assert not problems, "\n".join(problems)


def restart_id_sequences() -> None:
    """Each table's id sequence restarts just after its highest id (at 1 for an empty table),
    as on a new database. (On PostgreSQL a sequence keeps that value after the test's
    rollback; it then still follows its table's highest id, so no other test is affected.)"""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # SQLite has no reset statement of Django's: without its row in sqlite_sequence, a
            # table's next id is one past its highest (an earlier transactional test's flush
            # keeps the row, and with it the ids that test used).
            tables = [model._meta.db_table for model in apps.get_models()]
            cursor.execute(
                f"DELETE FROM sqlite_sequence WHERE name IN ({', '.join(['%s'] * len(tables))})",
                tables,
            )
        for statement in connection.ops.sequence_reset_sql(no_style(), apps.get_models()):
            cursor.execute(statement)


@pytest.fixture
def demo_data(db) -> None:
    """The `demo` command's data, with the ids a fresh `make run` gives it."""
    restart_id_sequences()
    for seed in demo_seeds():
        seed()


def call_url(path: str, call: dict) -> str:
    url = path.format(**call["path_values"])
    if call["query"]:
        url += "?" + urlencode(call["query"])
    return url


def send_what_it_follows(document: dict, operation_id: str, sender: APIClient) -> None:
    """The first documented call of each operation `operation_id` follows (FOLLOWS), sent
    as documented, each getting its documented status."""
    for earlier in FOLLOWS.get(operation_id, ()):
        path, method, operation = operations(document)[earlier]
        first = documented_calls(operation)[0]
        body = {} if first["body"] is None else {"data": json.dumps(first["body"])}
        response = sender.generic(method.upper(), call_url(path, first), content_type=JSON, **body)
        assert response.status_code == first["status"], (earlier, response.content)


def differences(documented, answered, where: str = "") -> list[str]:
    """Where the answer differs from the documented one; a stored time only has to be a time."""
    if isinstance(documented, dict) and isinstance(answered, dict):
        found = [
            f"{where}/{key}: documented but not answered" for key in documented.keys() - answered
        ]
        found += [
            f"{where}/{key}: answered {answered[key]!r}, not documented"
            for key in answered.keys() - documented
        ]
        for key in documented.keys() & answered.keys():
            if key in STORED_TIMES and isinstance(documented[key], str):
                if (
                    not isinstance(answered[key], str)
                    or datetime.fromisoformat(answered[key]).utcoffset() is None
                ):
                    found.append(f"{where}/{key}: answered {answered[key]!r}, not a date-time")
                continue
            found += differences(documented[key], answered[key], f"{where}/{key}")
        return found
    if isinstance(documented, list) and isinstance(answered, list):
        if len(documented) != len(answered):
            return [f"{where}: {len(answered)} entries answered, {len(documented)} documented"]
        return [
            found
            for index, (one, other) in enumerate(zip(documented, answered, strict=True))
            for found in differences(one, other, f"{where}/{index}")
        ]
    if documented != answered or type(documented) is not type(answered):
        return [f"{where}: answered {answered!r}, documented {documented!r}"]
    return []


@pytest.mark.parametrize("operation_id", DOCUMENTED_OPERATIONS)
def test_each_documented_call_gets_its_documented_answer(
    operation_id, demo_data, client, api_key, shop_key
):
    path, method, operation = operations(fetch_document(client))[operation_id]
    # The shop's operations need a shop key, the others a partner key (the 403 says which).
    sender = APIClient()
    sender.credentials(HTTP_X_API_KEY=shop_key if "shop" in operation["tags"] else api_key)
    calls = documented_calls(operation)
    assert calls, f"{operation_id} documents no call"
    send_what_it_follows(fetch_document(client), operation_id, sender)

    for call in calls:
        url = call_url(path, call)
        body = {} if call["body"] is None else {"data": json.dumps(call["body"])}
        response = sender.generic(method.upper(), url, content_type=JSON, **body)

        assert response.status_code == call["status"], (call["name"], response.content)
        assert not differences(call["answer"], response.json()), (
            f"{operation_id} {call['name']}: the documented answer is not the service's:\n"
            + "\n".join(differences(call["answer"], response.json()))
            + f"\nanswered: {json.dumps(response.json(), ensure_ascii=False)}"
        )


# ------------------------------------------------------------------------------
# Every request example, tried on a fresh `make run`
# ------------------------------------------------------------------------------
# The operations whose examples send figures: applied, never stale.
SYNC_OPERATIONS = ("products_sync", "products_item")
TRY_IT = re.compile(r"-X (\w+) http://127\.0\.0\.1:\d+(/\S+) .* -d '(\{.*\})'$", re.MULTILINE)


def make_run() -> dict:
    """What `make run` does to a new database (`manage.py demo`, ids from 1) and what it
    prints: the two keys, and the call of its "Try it" curl line (method, path, body)."""
    restart_id_sequences()
    printed = io.StringIO()
    call_command("demo", stdout=printed)
    text = printed.getvalue()
    keys = dict(re.findall(r"export (API_KEY|SHOP_KEY)=(\S+)", text))
    [(method, path, body)] = TRY_IT.findall(text)
    return {"keys": keys, "try_it": (method, path, json.loads(body))}


def send(sender: APIClient, method: str, url: str, body) -> object:
    data = {} if body is None else {"data": json.dumps(body)}
    return sender.generic(method.upper(), url, content_type=JSON, **data)


@pytest.mark.django_db
def test_every_request_example_applies_as_documented_on_a_fresh_make_run(client):
    """Each request example of the document (every operation with a body), sent on the data
    of a fresh `make run` with the keys it prints, gets its documented status and answer, and
    a figure is applied: none stale, `products_updated` as documented. The same holds after
    the figure of the curl line `make run` prints: no example is dated before it."""
    run = make_run()
    document = fetch_document(client)
    senders = {}
    for scope, key in (("shop", run["keys"]["SHOP_KEY"]), ("partner", run["keys"]["API_KEY"])):
        senders[scope] = APIClient()
        senders[scope].credentials(HTTP_X_API_KEY=key)
    try_method, try_path, try_body = run["try_it"]
    tried = set()

    for operation_id, (path, method, operation) in operations(document).items():
        bodies = media(operation.get("requestBody", {})).get("examples", {})
        if not bodies:
            continue
        calls = documented_calls(operation)
        # Every request example is a documented call, with its answer.
        assert [call["name"] for call in calls] == list(bodies), operation_id
        sender = senders["shop" if "shop" in operation["tags"] else "partner"]
        for call in calls:
            url = call_url(path, call)
            after_try_it = (False, True) if operation_id in SYNC_OPERATIONS else (False,)
            for after in after_try_it:
                where = f"{operation_id} {call['name']}" + (" after Try it" if after else "")
                with transaction.atomic():
                    send_what_it_follows(document, operation_id, senders["partner"])
                    if after:
                        figure = send(senders["partner"], try_method, try_path, try_body)
                        assert figure.status_code == 200, figure.content
                        assert figure.json()["products_updated"] == 1
                    response = send(sender, method, url, call["body"])

                    assert response.status_code == call["status"], (where, response.content)
                    found = differences(call["answer"], response.json())
                    assert not found, f"{where}:\n" + "\n".join(found)
                    if operation_id in SYNC_OPERATIONS and call["status"] == 200:
                        answered = response.json()
                        assert answered["stale_products"] == 0, where
                        assert answered["stale_keys"] == [], where
                        assert answered["products_updated"] == call["answer"]["products_updated"]
                        assert answered["products_updated"] > 0, where
                    transaction.set_rollback(True)
            tried.add(operation_id)

    assert tried == set(OPERATIONS_WITH_A_BODY)


# ------------------------------------------------------------------------------
# What a person meets in Swagger UI
# ------------------------------------------------------------------------------
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))


def without_document_time(body):
    """The body with its `sync_context.posted_at` (a snapshot's `posted_at`) only checked to
    be a date-time: it is the moment the document was generated, a second apart between two
    fetches."""
    if isinstance(body, dict) and "posted_at" in body:
        assert datetime.fromisoformat(body["posted_at"]).utcoffset() is not None
        body = {**body, "posted_at": "<document time>"}
    context = body.get("sync_context") if isinstance(body, dict) else None
    if not isinstance(context, dict) or "posted_at" not in context:
        return body
    assert datetime.fromisoformat(context["posted_at"]).utcoffset() is not None
    return {**body, "sync_context": {**context, "posted_at": "<document time>"}}


def swagger_ui(browser, base_url: str, key: str):
    """A page of Swagger UI in which the user has authorized `key` (the padlock's dialog)."""
    page = browser.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{base_url}/api/docs/")
    page.click("button.authorize")
    page.fill(".modal-ux input", key)
    page.click(".modal-ux button.authorize")
    page.click(".modal-ux button.btn-done")
    return page


@pytest.mark.browser
@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)",
)
def test_swagger_ui_try_it_out_sends_the_documented_call(
    live_server, transactional_db, demo_data, api_key, shop_key, monkeypatch, client
):
    """In Swagger UI, "Try it out" on each operation shows the documented request body (not
    one made up from the schema), with the documented path values filled in, and "Execute"
    gets the documented status."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    # Playwright's sync API runs an event loop in this thread; the fixtures' ORM calls are
    # still plain synchronous ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    documented = operations(fetch_document(client))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        pages = {
            "shop": swagger_ui(browser, live_server.url, shop_key),
            "partner": swagger_ui(browser, live_server.url, api_key),
        }
        for operation_id in OPERATIONS_WITH_A_BODY:
            _, _, operation = documented[operation_id]
            (tag,) = operation["tags"]
            page = pages["shop" if tag == "shop" else "partner"]
            calls = documented_calls(operation)
            block = page.locator(f"#operations-{tag}-{operation_id}")
            block.locator(".opblock-summary").click()
            block.locator("button.try-out__btn").click()

            shown = block.locator("textarea.body-param__text").input_value()
            assert calls, f"{operation_id}: Swagger UI makes a body up from the schema: {shown}"
            first = calls[0]
            assert without_document_time(json.loads(shown)) == without_document_time(
                first["body"]
            ), operation_id
            for name, value in first["path_values"].items():
                field = block.locator(f'tr[data-param-name="{name}"] input')
                assert field.input_value() == str(value), (operation_id, name)
            block.locator("button.execute").click()
            answered = block.locator(".live-responses-table tbody .response-col_status").first
            assert answered.inner_text().split()[0] == str(first["status"]), operation_id
        browser.close()
