"""The product synchronization (operations 1 and 2).

- `service`: `sync_call` (one API call, from its bytes) and `products_sync` (the items, in
  one transaction);
- `attempt`: that transaction, in its named steps (`sync_attempt`); `apply`: its writes
  (`sync_apply`) or its dry run (`sync_dry_run`);
- `call`: the caller, the call's facts, the result and the refusal;
- `rules`: the item limit and repeated keys, checked before anything is read;
- `resolve`: which product each item names, locked; `changes`: what it changes;
  `history`: the history rows of those changes; `rows`: the layout of the rows read;
- `idempotency`: every claim and replay of a retried request;
- `audit`: the one recorder of every outcome's audit row;
- `pause`: the pause switch.

Pending keys are resolved by `sync.pending` (a product that answers them, staff, an import)
and recorded and closed by a sync through `sync.pending_sync`; the catalogue import is
`sync.imports`.
"""
