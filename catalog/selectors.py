"""Reads of the catalogue: what the shop can sell, and the units open reservations hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product, effective_safety_buffer, salable


def stock_for_keys(*, keys: Sequence[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """What the shop can sell of each (ean, stock_code) key, in the keys' order.

    Keys are matched as the sync matches them; a key naming no product, or several, is not
    found and says why.
    """
    rows = Product.objects.filter(stock_code__in={code for _, code in keys}).values_list(
        "ean", "stock_code", "shop_quantity", "reserved", "safety_buffer", "status"
    )
    products = ProductsByKey(rows, key=lambda row: (row[0], row[1]))
    answer = []
    for index, (ean, stock_code) in enumerate(keys):
        candidates = products.candidates(ean, stock_code)
        entry: dict[str, Any] = {"index": index, "stock_code": stock_code, "ean": ean or ""}
        if len(candidates) == 1:
            _, _, quantity, reserved, buffer, status = candidates[0]
            entry.update(
                found=True,
                reason=None,
                shop_quantity=quantity,
                reserved=reserved,
                safety_buffer=effective_safety_buffer(buffer),
                salable=salable(quantity, reserved, buffer),
                status=status,
            )
        else:
            entry.update(
                found=False,
                reason=str(
                    PendingProduct.Reason.AMBIGUOUS if candidates else PendingProduct.Reason.UNKNOWN
                ),
                shop_quantity=None,
                reserved=None,
                safety_buffer=None,
                salable=None,
                status=None,
            )
        answer.append(entry)
    return answer
