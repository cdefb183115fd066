"""How values read in the back-office: one time format, and decimals without noise."""

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from django import forms
from django.contrib import admin
from django.utils import formats, timezone


def local_time(value: datetime | None) -> str:
    """A time in TIME_ZONE, in the one format (seconds and zone, config/formats)."""
    if value is None:
        return "-"
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT")


def decimal_text(value: Decimal, *, min_places: int) -> str:
    """At least `min_places` decimals, more only when they are significant (no exponent)."""
    places = max(min_places, -value.normalize().as_tuple().exponent)
    return f"{value:.{places}f}"


def money(value: Decimal | None) -> str:
    """Two decimals, or as many as the value has (prices are kept to four)."""
    if value is None:
        return "-"
    return decimal_text(value, min_places=2)


class DecimalInput(forms.NumberInput):
    """A number field showing a stored decimal trimmed (89.90, not 89.9000)."""

    def __init__(self, attrs=None, *, min_places: int = 2):
        super().__init__(attrs)
        self.min_places = min_places

    def format_value(self, value):
        if isinstance(value, Decimal) and value.is_finite():
            return decimal_text(value, min_places=self.min_places)
        return super().format_value(value)


def admin_decimal(model, name: str, show: Callable[[Decimal | None], str] = money):
    """A read-only admin column or field for a decimal model field, shown with `show`.

    Under the field's own label and ordered by it; Django itself would print every stored
    decimal place.
    """
    field = model._meta.get_field(name)

    @admin.display(description=field.verbose_name, ordering=name)
    def display(model_admin, obj) -> str:
        return show(getattr(obj, name))

    return display
