"""CSV as ERPs and spreadsheets write it, and names a user may have misspelt.

A spreadsheet set to a language whose decimal mark is a comma (Czech, German, French ...) saves
"CSV" separated by semicolons. `csv_delimiter` reads the separator from the header line, and is
the one rule for every CSV the project reads: the connector's documents and order files, and
the service's import commands (`core/files.py` imports it from here: the connector needs
nothing but the standard library and never imports the service, so the rule lives on its side).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def csv_delimiter(header_line: str) -> str:
    """ "," or ";": whichever of the two the header line holds more of (a comma on a tie)."""
    return ";" if header_line.count(";") > header_line.count(",") else ","


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
