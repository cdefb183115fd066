"""Demo data of the orders app for `manage.py demo`."""


def seed() -> list[str]:
    """Create the demo records once; returns lines to show the user."""
    return []
