"""The default warehouse: `migrate` makes it, and the system checks warn while it is missing."""

import pytest
from django.core import checks
from django.core.management import call_command
from django.test import override_settings

from stock.models import Warehouse


def _stock_warnings() -> list[checks.CheckMessage]:
    return [message for message in checks.run_checks() if message.id == "stock.W001"]


@pytest.mark.django_db(transaction=True)
class TestMigrateMakesIt:
    def test_it_exists_after_migrate(self):
        main = Warehouse.objects.get(code="MAIN")

        assert (main.name, main.sells, main.priority, main.lead_time_days) == ("MAIN", True, 100, 0)

    def test_migrate_makes_it_again_when_it_was_deleted(self):
        Warehouse.objects.filter(code="MAIN").delete()

        call_command("migrate", verbosity=0)

        main = Warehouse.objects.get(code="MAIN")
        assert (main.name, main.sells, main.priority, main.lead_time_days) == ("MAIN", True, 100, 0)

    def test_migrate_leaves_an_existing_one_as_it_is(self):
        Warehouse.objects.filter(code="MAIN").update(name="Central store", priority=5)

        call_command("migrate", verbosity=0)

        main = Warehouse.objects.get(code="MAIN")
        assert (main.name, main.priority) == ("Central store", 5)
        assert Warehouse.objects.filter(code="MAIN").count() == 1

    @override_settings(DEFAULT_WAREHOUSE="CENTRAL")
    def test_migrate_makes_the_one_the_setting_names(self):
        call_command("migrate", verbosity=0)

        assert Warehouse.objects.filter(code="CENTRAL", name="CENTRAL").exists()


@pytest.mark.django_db
class TestSystemCheck:
    def test_no_warning_while_the_default_warehouse_exists(self):
        assert _stock_warnings() == []

    @override_settings(DEFAULT_WAREHOUSE="NOWHERE")
    def test_a_warning_naming_migrate_and_create_warehouse_when_it_does_not_exist(self):
        warnings = _stock_warnings()

        assert len(warnings) == 1
        (warning,) = warnings
        assert warning.level == checks.WARNING
        assert "NOWHERE" in warning.msg
        assert "migrate" in warning.hint
        assert "create_warehouse NOWHERE" in warning.hint

    def test_a_warning_when_the_default_warehouse_was_deleted(self):
        Warehouse.objects.filter(code="MAIN").delete()

        assert [warning.id for warning in _stock_warnings()] == ["stock.W001"]

    @override_settings(DEFAULT_WAREHOUSE="BRNO")
    def test_no_warning_once_create_warehouse_made_it(self):
        call_command("create_warehouse", "BRNO", stdout=None)

        assert _stock_warnings() == []
