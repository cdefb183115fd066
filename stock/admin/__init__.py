"""The stock back-office: warehouses, the levels per product and warehouse, the reservations and
the movements that say why each figure moved.

- `warehouses`: the warehouses staff edit; `records`: the levels, movements and reservations,
  read-only (both register their admins when Django imports this package);
- `product_page`: the stock shown on a product's page; `order_page`: on an order's page;
- `shared`: links and read-only pieces, below `sync.admin` and `orders.admin`, which import
  them.
"""

from stock.admin import records, warehouses  # noqa: F401 (registers the admins)
