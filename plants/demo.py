"""Demo data of the plants app for `manage.py demo`."""


def seed() -> list[str]:
    """Create the demo records once; returns lines to show the user."""
    return []
