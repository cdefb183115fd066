"""Which product a key names: the one lookup rule of the sync, pending resolution and rematch.

A key with an EAN names the product with exactly that (ean, stock_code); a key without one names
the products with that stock_code, and is ambiguous when there are several.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

R = TypeVar("R")


class ProductsByKey(Generic[R]):
    """Product rows (tuples, models) indexed for the lookup rule."""

    def __init__(self, rows: Iterable[R], *, key: Callable[[R], tuple[str, str]]):
        self._by_key: dict[tuple[str, str], R] = {}
        self._by_code: dict[str, list[R]] = defaultdict(list)
        for row in rows:
            ean, stock_code = key(row)
            self._by_key[(ean, stock_code)] = row
            self._by_code[stock_code].append(row)

    def candidates(self, ean: str | None, stock_code: str) -> list[R]:
        """The products the key names: none (unknown), one, or several (ambiguous)."""
        if ean:
            row = self._by_key.get((ean, stock_code))
            return [row] if row is not None else []
        return list(self._by_code.get(stock_code, ()))

    def match(self, ean: str | None, stock_code: str) -> R | None:
        """The one product the key names, or None when it names none or several."""
        found = self.candidates(ean, stock_code)
        return found[0] if len(found) == 1 else None
