"""The staff back-office: products and their history, the stock shop orders hold
(reservations), pending keys, sync audits, the pause switch.

- `products`: the product list and page (the stock pieces come from `stock.admin`);
- `pending_keys`: pending keys and their actions; `audits`: sync audits and product history;
- `pause`: the pause switch.
"""

from django.contrib import admin

from sync.admin import audits, pause, pending_keys, products  # noqa: F401 (registers the admins)

admin.site.site_header = "Stock synchronization back-office"
admin.site.site_title = "Stock synchronization"
admin.site.index_title = "Dashboard"
