"""The service behind pgbouncer in transaction pooling mode (docs/DEPLOYMENT.md).

Consecutive transactions of one Django connection run on whatever server session pgbouncer
hands out, so nothing may outlive a transaction: server-side cursors, prepared statements,
session settings, temporary tables. The concurrency and fault tests run again here with every
connection of the service going through Debian's pgbouncer on loopback (DATABASE_URL points at
it, DATABASE_TRANSACTION_POOLING is on); the tests' own checks read PostgreSQL directly.
"""

import psycopg
import pytest

from tests.e2e import test_concurrency, test_faults
from tests.e2e.live_service import manage
from tests.e2e.pgbouncer import PGBOUNCER, pgbouncer
from tests.e2e.reliability_harness import (
    CuttableProxy,
    call,
    item,
    server_url,
    site,
    url_through,
)
from tests.environment import missing_tool_reason

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.skipif(PGBOUNCER is None, reason=missing_tool_reason("pgbouncer", "pgbouncer")),
]

# The scenarios of test_concurrency and test_faults, run here against this module's service.
CONCURRENCY = (
    test_concurrency.test_overlapping_batches_in_opposite_key_orders_serialize,
    test_concurrency.test_the_same_request_sent_at_once_applies_once,
    test_concurrency.test_racing_acknowledgements_give_exactly_one_200,
    test_concurrency.test_racing_acknowledgements_with_the_same_reference_all_succeed,
    test_concurrency.test_two_instances_under_mixed_load_answer_no_5xx_and_lose_nothing,
    test_concurrency.test_throttling_counts_across_app_servers_through_the_database_cache,
)
FAULTS = (
    test_faults.test_a_database_connection_killed_mid_batch_gives_503_and_the_retry_applies,
    test_faults.test_a_worker_killed_mid_batch_leaves_nothing_half_applied,
    test_faults.test_the_database_down_gives_503_and_the_service_recovers_by_itself,
)


@pytest.fixture(scope="module")
def bouncer():
    with pgbouncer(server_url()) as b:
        yield b


@pytest.fixture(scope="module")
def live(tmp_path_factory, bouncer, request):
    """The service through pgbouncer: 4 workers for the concurrency tests; for the fault tests
    one worker reaching pgbouncer through a proxy the test can cut."""
    workdir = tmp_path_factory.mktemp("pgbouncer")
    with site(workdir, "e2e_pgbouncer") as s:
        through_bouncer = bouncer.url_for(s.direct_url)
        # Every process of the service from now on (gunicorn, commands) goes through pgbouncer.
        s.env["DATABASE_URL"] = through_bouncer
        s.env["DATABASE_TRANSACTION_POOLING"] = "true"
        s.bouncer = bouncer
        with (
            CuttableProxy("127.0.0.1", bouncer.port) as proxy,
            s.gunicorn(workers=4) as server,
            s.gunicorn(
                workers=1, name="faults", database_url=url_through(through_bouncer, proxy.port)
            ) as faults_server,
        ):
            s.proxy = proxy
            s.servers = {"concurrency": server, "faults": faults_server}
            s.server = server
            yield s
            for name in ("gunicorn", "faults"):
                log = (workdir / f"{name}.log").read_text(errors="replace")
                assert "Traceback" not in log or name == "faults", log[-3000:]
            bouncer_log = bouncer.log_text()
            assert "prepared statement" not in bouncer_log, bouncer_log[-3000:]


@pytest.fixture
def on_faults_server(live):
    live.server = live.servers["faults"]
    yield live
    live.server = live.servers["concurrency"]


@pytest.mark.parametrize("scenario", CONCURRENCY, ids=lambda f: f.__name__.removeprefix("test_"))
def test_concurrency_through_pgbouncer(live, scenario):
    scenario(live)


@pytest.mark.parametrize("scenario", FAULTS, ids=lambda f: f.__name__.removeprefix("test_"))
def test_faults_through_pgbouncer(on_faults_server, scenario):
    scenario(on_faults_server)


def test_the_traffic_really_went_through_pgbouncer(live):
    database = live.direct_url.rsplit("/", 1)[-1]
    stats = live.bouncer.stats(database)
    assert stats, "pgbouncer has no figures for the service's database"
    assert int(stats["total_xact_count"]) > 100


def test_many_identical_queries_on_one_connection_need_no_prepared_statement(live):
    # psycopg prepares a statement the 5th time a connection runs it, unless told not to; on
    # another server session the next run would fail. A keep-alive worker runs the same
    # queries over and over on one connection.
    live.seed_products("PREP", 1)
    replies = [
        call(
            live.server.base_url,
            "PUT",
            "/api/v1/partner/products/item",
            key=live.api_key,
            body=item("PREP-00000", n),
        )
        for n in range(40)
    ]
    assert [r.status for r in replies] == [200] * 40


def test_export_pending_streams_without_a_server_side_cursor(live, tmp_path):
    rows = [item(f"EXP-{n:05d}", 1) for n in range(3000)]
    reply = call(
        live.server.base_url,
        "POST",
        "/api/v1/partner/products/sync",
        key=live.api_key,
        body={"products": rows},
    )
    assert reply.status == 200 and reply.json()["unknown_products"] == 3000
    target = tmp_path / "pending.csv"
    manage(live.env, "export_pending", str(target))
    lines = target.read_text().splitlines()
    assert sum(1 for line in lines if line.startswith("EXP-")) == 3000


def test_this_pgbouncer_really_pools_transactions(bouncer):
    # Why the setting exists: two connections whose statements share server sessions, with
    # psycopg's default prepare threshold, collide on its prepared statements' names.
    url = bouncer.url_for(server_url().rsplit("/", 1)[0] + "/postgres")

    def run(prepare_threshold):
        with (
            psycopg.connect(url, autocommit=True, prepare_threshold=prepare_threshold) as one,
            psycopg.connect(url, autocommit=True, prepare_threshold=prepare_threshold) as two,
        ):
            for n in range(8):
                one.execute("SELECT %s::int", [n]).fetchone()
                two.execute("SELECT %s::int + 1", [n]).fetchone()

    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        run(5)
    run(None)  # the service's setting with DATABASE_TRANSACTION_POOLING
