"""The stock back-office: warehouses, the levels per product and warehouse, the reservations and
the movements that say why each figure moved.

- `warehouses`: the warehouses staff edit; `records`: the levels, movements and reservations,
  read-only; `snapshots`: full snapshots, read-only but for the commit of a held one by its
  absent count and the abandonment (the three register their admins when Django imports this
  package), with `snapshot_review`, what a snapshot's page says of it;
- `product_page`: the stock shown on a product's page; `order_page`: on an order's page;
- `shared`: links and read-only pieces, below `sync.admin` and `orders.admin`, which import
  them.
"""

from stock.admin import records, snapshots, warehouses  # noqa: F401 (registers the admins)
