"""Fill a configuration template of deploy/: each `{{name}}` replaced with its value.

Shared by the render.py scripts beside it; standard library only (they run before the
virtualenv exists).
"""

from __future__ import annotations

from pathlib import Path


def fill(template: Path, values: dict[str, str]) -> str:
    """The template's text with every placeholder replaced; ValueError when one is left."""
    text = template.read_text()
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", value)
    if "{{" in text:
        raise ValueError("a placeholder of the template was left unrendered")
    return text
