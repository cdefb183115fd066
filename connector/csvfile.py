"""CSV as ERPs and spreadsheets write it, and names a user may have misspelt.

`near_miss` is the one rule of a misspelt field name, the service's (an item member it refuses
with `unknown_field`) and the connector's (a row field or column it refuses to send): the
service imports it from here, for the reason given below.

A spreadsheet set to a language whose decimal mark is a comma (Czech, German, French ...) saves
"CSV" separated by semicolons. `csv_delimiter` reads the separator from the header line, and is
the one rule for every CSV the project reads: the connector's documents and order files, and
the service's import commands (`core/files.py` imports it from here: the connector needs
nothing but the standard library and never imports the service, so the rule lives on its side).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable


def csv_delimiter(header_line: str) -> str:
    """ "," or ";": whichever of the two the header line holds more of (a comma on a tie)."""
    return ";" if header_line.count(";") > header_line.count(",") else ","


# A sent name of fewer characters is a near miss only when it equals a field once normalised.
NEAR_MISS_MIN_LENGTH = 5
NEAR_MISS_MAX_EDITS = 2


def normalised_name(name: str) -> str:
    """A member name lower-cased, with `-` and spaces read as `_` (`Shop-Quantity` ->
    `shop_quantity`)."""
    return name.lower().replace("-", "_").replace(" ", "_")


def edit_distance(first: str, second: str, *, limit: int = NEAR_MISS_MAX_EDITS) -> int:
    """The optimal string alignment distance (insertions, deletions, substitutions and
    transpositions of neighbours, no substring edited twice) of two strings, or `limit + 1`
    when it is over `limit`."""
    if abs(len(first) - len(second)) > limit:
        return limit + 1
    before: list[int] = []
    previous = list(range(len(second) + 1))
    for i, char in enumerate(first, 1):
        current = [i] + [0] * len(second)
        for j, other in enumerate(second, 1):
            distance = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            if i > 1 and j > 1 and char == second[j - 2] and first[i - 2] == other:
                distance = min(distance, before[j - 2] + 1)
            current[j] = distance
        if min(current) > limit:  # every alignment from here on costs more
            return limit + 1
        before, previous = previous, current
    return min(previous[-1], limit + 1)


def near_miss(name: str, fields: Iterable[str]) -> str | None:
    """The field that the member name `name` misses narrowly, or None (it is one of `fields`,
    or it is far from all of them).

    A near miss equals a field once normalised (`normalised_name`: `WAREHOUSE`, `Shop Quantity`,
    `stock-code`), or, when the sent name has five characters or more, is within two edits of
    one (`edit_distance`, counted on the normalised name: `warehose`, `catalogprice`). Of
    several, the closest, then the first of `fields`. `warehouse_id` (three edits from
    `warehouse`), `colour` or `eam` (under five characters) are no near miss.
    """
    known, by_size = _index(tuple(fields))
    if name in known:
        return None
    normal = normalised_name(name)
    if normal in known:
        return normal
    if len(name) < NEAR_MISS_MIN_LENGTH:
        return None
    # Each edit changes the length by one and the set of characters by two at most: two cheap
    # tests first (a body may carry hundreds of thousands of distinct names).
    size = len(normal)
    letters = None
    best = best_distance = None
    for width in range(size - NEAR_MISS_MAX_EDITS, size + NEAR_MISS_MAX_EDITS + 1):
        for order, field, field_letters in by_size.get(width, ()):
            if letters is None:
                letters = _letters(normal)
            if (letters ^ field_letters).bit_count() > 2 * NEAR_MISS_MAX_EDITS:
                continue
            distance = edit_distance(normal, field)
            if distance <= NEAR_MISS_MAX_EDITS and (
                best is None or (distance, order) < (best_distance, best[0])
            ):
                best, best_distance = (order, field), distance
    return None if best is None else best[1]


def _letters(text: str) -> int:
    """The set of a text's characters as bits (a character's code point modulo 64: distinct for
    `_` and the ASCII letters; two characters sharing a bit only make the test laxer)."""
    bits = 0
    for char in text:
        bits |= 1 << (ord(char) & 63)
    return bits


@functools.lru_cache(maxsize=16)
def _index(
    fields: tuple[str, ...],
) -> tuple[frozenset, dict[int, tuple[tuple[int, str, int], ...]]]:
    """The fields as a set, and by length, each as (its place in `fields`, itself, its
    `_letters`)."""
    sizes: dict[int, list[tuple[int, str, int]]] = {}
    for order, field in enumerate(fields):
        sizes.setdefault(len(field), []).append((order, field, _letters(field)))
    return frozenset(fields), {size: tuple(profiles) for size, profiles in sizes.items()}


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` most likely misspells (`seasn` -> `season`), or None."""
    known = list(known)
    by_case = {candidate.lower(): candidate for candidate in known}
    if name.strip().lower() in by_case:
        return by_case[name.strip().lower()]
    found = difflib.get_close_matches(name.strip().lower(), list(by_case), n=1, cutoff=0.75)
    return by_case[found[0]] if found else None


def unknown_names(names: Iterable[str], known: Iterable[str], *, where=None) -> str:
    """The names, each with the known name it most likely misspells: "'seasn' (did you mean
    'season'?), 'colour'". `where(name)`, when given, adds where a name was first seen."""
    known = tuple(known)
    parts = []
    for name in names:
        notes = []
        if (close := closest_name(name, known)) is not None:
            notes.append(f"did you mean {close!r}?")
        if where is not None:
            notes.append(where(name))
        parts.append(f"{name!r} ({'; '.join(notes)})" if notes else repr(name))
    return ", ".join(parts)
