"""Stock: warehouses, levels per product and warehouse, reservations, and the movements that
record why each figure moved; and the only functions that write them.

A level holds the partner system's absolute figure for a product in one warehouse, and the
units of the open reservations pinned there. A reservation is a row with its own state (open,
consumed, released), never a hidden decrement of the partner system's figure.
`Product.shop_quantity` and `Product.reserved` are the sums of the selling warehouses' levels,
rewritten in the same transaction as every change, so the sums and the levels never disagree.
Every change of a level's quantity or reserved units is recorded as a `StockMovement` with its
reason and source.

Every writer runs inside its caller's transaction, with the products' rows locked by the
caller (placement, sync, imports, pending keys, staff) or locked by the writer in primary-key
order (release, booking), so that concurrent writers queue instead of deadlocking. A
warehouse's `sells` and `priority` change only through `warehouse_save`: the products holding
a level there are locked first, then the warehouse's row; a writer reads a warehouse after its
products' locks, with `WAREHOUSE_READ` where it may make a product's first level there.

One module per concept; each function is imported from its own module:

- `warehouses`: `warehouse_save`, `default_warehouse`, `default_warehouse_id`,
  `item_warehouse_code`, `warehouses_by_code`, `warehouses_read`, `WAREHOUSE_READ`;
- `levels`: `levels_set`, `levels_for_sync`, `levels_spread`, `levels_later`,
  `levels_held`;
- `level_statements`: the PostgreSQL statements that write levels in one round trip:
  `levels_from_table` (a large sync's temporary table), `levels_alone`, and the statements
  behind `levels_for_sync` and `levels_spread`;
- `allocation`: where an order's units are taken from: `reservations_allocate`,
  `units_taken`, `Part`;
- `reservations`: `reservations_open`, `reservations_release`, `reservations_book`,
  `reservations_unbook`, `reservations_consume`;
- `reserved`: the bookkeeping of reserved units behind them (`reserved_shift`,
  `reserved_recount`) and `reservations_recount`, which rebuilds every figure;
- `sums`: `products_resum`, the products' figures as the sums of their levels;
- `movements`: `Source` (why stock moved, as each movement records it), the columns of a
  movement's insert, and `movements_purge`;
- `selectors`: the readers: `stock_for_keys`, `reservations_open_summary`,
  `reservations_open_by_warehouse`, `warehouse_code_warning`;
- `snapshots`: full snapshots (a warehouse's whole stock as of one document time, whose commit
  zeroes the levels it did not name): `snapshot_open`, `snapshot_find`, `snapshot_expire_due`,
  `snapshot_abandon`, `snapshot_commit`, `snapshot_absent_page`, `snapshot_part_lock`,
  `snapshot_part_received`, `snapshot_record`, and their answers and refusals
  (`SnapshotCommitted`, `SnapshotHeld`, `SnapshotConflict`, `SnapshotStateRefused`); the
  snapshot's row is locked before the products;
- `snapshot_statements`: the absent levels' count, lock and listing, and the PostgreSQL
  statement that zeroes them (`absent_zero`).
"""
