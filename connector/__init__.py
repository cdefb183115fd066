"""Reference connector: pushes posted stock documents of the partner system to the service,
pulls the orders waiting for it, acknowledges them and reports what became of them.

It follows the interface's connector rules (when to call, how to chunk, which request_id and
sync_context to send, how responses decide a document's sync status) and needs nothing but the
standard library and, on a terminal, tqdm for the progress bar. It never imports Django: it is
the partner system's side of the interface.

`make install` installs it as the command `stock-sync-connector`, which runs from any folder;
in the checkout `python -m connector` is the same command. `--help` lists each command's
columns, exit statuses and environment variables.
"""

from connector.document import Document, DocumentInvalid, DocumentNotPosted, load_document
from connector.order_status import StatusResult, orders_report_status
from connector.orders import AckResult, PullResult, orders_acknowledge, orders_pull
from connector.push import ChunkResult, PushResult, SyncStatus, push_document
from connector.transport import HttpTransport, Reply, Transport, TransportError

__all__ = [
    "AckResult",
    "ChunkResult",
    "Document",
    "DocumentInvalid",
    "DocumentNotPosted",
    "HttpTransport",
    "PullResult",
    "PushResult",
    "Reply",
    "StatusResult",
    "SyncStatus",
    "Transport",
    "TransportError",
    "load_document",
    "orders_acknowledge",
    "orders_pull",
    "orders_report_status",
    "push_document",
]
