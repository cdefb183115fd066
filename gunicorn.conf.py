"""gunicorn settings for production: `gunicorn -c gunicorn.conf.py config.wsgi`.

Every value can be overridden from the environment (the names are below) or on the command
line. docs/DEPLOYMENT.md explains how the numbers relate to PostgreSQL's connection limit.
"""

import gc
import glob
import multiprocessing
import os
import shutil
import tempfile

# Metrics of the whole app server (see monitoring/metrics.py): every worker writes its counters
# to files in this directory and GET /metrics sums them. Set before the application is loaded,
# so prometheus_client starts in multiprocess mode; a directory of its own unless configured.
_OWN_METRICS_DIR_PREFIX = "stock-sync-metrics-"
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=_OWN_METRICS_DIR_PREFIX)
os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)


def on_starting(server):
    """A new app server starts its counters at 0: the files of an earlier run are removed.

    Called once (not on a reload), after the preloaded application created its own, empty,
    files in this process: those stay.
    """
    own = f"_{os.getpid()}.db"
    for path in glob.glob(os.path.join(os.environ["PROMETHEUS_MULTIPROC_DIR"], "*.db")):
        if not path.endswith(own):
            os.remove(path)


def on_exit(server):
    """A directory gunicorn made for itself goes with it; a configured one stays."""
    path = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if os.path.basename(path).startswith(_OWN_METRICS_DIR_PREFIX) and os.path.dirname(
        os.path.abspath(path)
    ) == os.path.abspath(tempfile.gettempdir()):
        shutil.rmtree(path, ignore_errors=True)


def pre_fork(server, worker):
    """The preloaded application's objects live as long as the process: frozen before a worker
    is forked, its full collections leave them out (they walked them all, 70 to 80 ms each, on
    the benchmark's machine), and its memory pages stay shared with the master's."""
    gc.freeze()


def child_exit(server, worker):
    """A dead worker's live gauges go; its counters stay in the sums (they are totals)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


# Loopback by default: only nginx on the same host reaches the workers (deploy/nginx), so no
# client can go past it, hold a worker with a slow request or send its own X-Forwarded-For.
# GUNICORN_BIND names anything else: a unix socket (`unix:/run/stock-sync/gunicorn.sock`), or
# a private address when the proxy runs on another host (then firewall it to that host).
bind = os.environ.get("GUNICORN_BIND") or f"127.0.0.1:{_int('PORT', 8000)}"

# Synchronous workers: a request is a short database transaction, and each worker holds at most
# one PostgreSQL connection, so workers x app servers must stay under max_connections. Slow
# clients never reach them: nginx in front reads whole requests first (deploy/nginx). Chosen by
# measurement against threaded workers (docs/DEPLOYMENT.md, "Worker class"); the two variables
# below exist to repeat that measurement.
workers = _int("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 8))
worker_class = os.environ.get("GUNICORN_WORKER_CLASS") or "sync"
threads = _int("GUNICORN_THREADS", 1)

# A 5000-item batch is about a second of work on two cores; waiting for the row locks of
# overlapping batches, on a busy database, can add many times that. A worker is only killed when
# it is clearly stuck: its transaction is then rolled back, so nothing is left half-applied.
timeout = _int("GUNICORN_TIMEOUT", 120)
# On a restart (deploy, SIGHUP) a running batch gets this long to finish before it is cut.
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 60)
# Must be shorter than the load balancer's idle timeout, or it may reuse a closed connection.
keepalive = _int("GUNICORN_KEEPALIVE", 5)

# Recycle workers now and then so that slow leaks cannot accumulate; jitter keeps them from all
# restarting at once.
max_requests = _int("GUNICORN_MAX_REQUESTS", 2000)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", 200)

# Load the application once in the master: a configuration error stops the start at once
# instead of making every worker crash in a loop. Django opens no connection at import.
preload_app = True

# Workers' heartbeat files in memory: a slow or full disk must not get healthy workers killed.
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"

# Request heads: above nginx's own limits (deploy/nginx: request lines up to 8 KiB, header lines
# up to 8 KiB, 32 KiB of headers in all), so that whatever nginx lets through gunicorn accepts and
# its HTML 414 and 431 never reach a client; nginx answers its own, in JSON. 8190 is the longest
# request line gunicorn allows.
limit_request_line = 8190
limit_request_field_size = 16384
limit_request_fields = 32768

# Trust X-Forwarded-* only from the load balancer (comma-separated addresses).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# The application writes one log line per request itself; gunicorn's access log is optional.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
