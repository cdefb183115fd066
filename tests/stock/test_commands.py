"""`create_warehouse` and `list_warehouses`: what staff type, what they read back."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from stock.levels import levels_set
from stock.models import StockMovement, Warehouse
from stock.movements import Source
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory

pytestmark = pytest.mark.django_db


def _run(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def _fields(code: str) -> tuple:
    warehouse = Warehouse.objects.get(code=code)
    return (warehouse.name, warehouse.sells, warehouse.priority, warehouse.lead_time_days)


class TestCreateWarehouse:
    def test_a_new_warehouse_with_the_defaults_is_named_by_its_code(self):
        assert _run("create_warehouse", "BRNO") == "BRNO created\n"

        assert _fields("BRNO") == ("BRNO", True, 100, 0)

    def test_a_new_warehouse_with_every_attribute(self):
        out = _run(
            "create_warehouse",
            "drop-ship.1_A",
            "--name",
            "Supplier drop-ship",
            "--priority",
            "-5",
            "--lead-time-days",
            "3",
            "--sells",
            "no",
        )

        assert out == "drop-ship.1_A created\n"
        assert _fields("drop-ship.1_A") == ("Supplier drop-ship", False, -5, 3)

    def test_an_existing_warehouse_changes_only_the_given_attributes(self):
        _run("create_warehouse", "BRNO", "--name", "Brno branch", "--priority", "20")

        assert _run("create_warehouse", "BRNO", "--lead-time-days", "2") == "BRNO updated\n"
        assert _fields("BRNO") == ("Brno branch", True, 20, 2)
        assert _run("create_warehouse", "BRNO", "--sells", "NO") == "BRNO updated\n"
        assert _fields("BRNO") == ("Brno branch", False, 20, 2)
        assert _run("create_warehouse", "BRNO") == "BRNO updated\n"
        assert _fields("BRNO") == ("Brno branch", False, 20, 2)
        assert Warehouse.objects.filter(code="BRNO").count() == 1

    def test_the_default_warehouse_exists_after_migrate_and_is_updated(self):
        assert _run("create_warehouse", "MAIN", "--name", "Central store") == "MAIN updated\n"
        assert _fields("MAIN") == ("Central store", True, 100, 0)

    def test_codes_are_case_sensitive(self):
        _run("create_warehouse", "brno")

        assert _run("create_warehouse", "BRNO") == "BRNO created\n"
        assert set(Warehouse.objects.values_list("code", flat=True)) >= {"brno", "BRNO"}

    def test_a_code_that_differs_from_another_only_by_case_is_made_with_a_warning(self):
        _run("create_warehouse", "EAST")
        out, err = StringIO(), StringIO()

        call_command("create_warehouse", "east", stdout=out, stderr=err)

        assert out.getvalue() == "east created\n"
        assert err.getvalue() == (
            "Warning: The code east differs only by case from EAST: codes are case-sensitive, "
            "so east is a warehouse of its own.\n"
        )
        assert set(Warehouse.objects.values_list("code", flat=True)) >= {"EAST", "east"}

    def test_no_warning_for_a_code_of_its_own(self):
        _run("create_warehouse", "EAST")
        err = StringIO()

        call_command("create_warehouse", "WEST", stdout=StringIO(), stderr=err)

        assert err.getvalue() == ""

    def test_a_warehouse_that_stops_selling_leaves_the_products_sums(self):
        product = ProductFactory(shop_quantity=4)
        branch, _ = warehouse_save("BRNO")
        levels_set(
            {product.pk: 6},
            source=Source(StockMovement.Reason.STAFF_EDIT, staff_user="test"),
            now=product.updated_at,
            warehouse_id=branch.pk,
        )
        product.refresh_from_db()
        assert product.shop_quantity == 10

        _run("create_warehouse", "BRNO", "--sells", "no")

        product.refresh_from_db()
        assert product.shop_quantity == 4

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("",), "is not a warehouse code"),
            (("BR NO",), "is not a warehouse code"),
            (("BRNO/1",), "is not a warehouse code"),
            (("Brno-é",), "is not a warehouse code"),
            (("X" * 33,), "is not a warehouse code"),
            ((" BRNO",), "is not a warehouse code"),
            (("BRNO", "--priority", "first"), "--priority must be a whole number"),
            (("BRNO", "--priority", "1.5"), "--priority must be a whole number"),
            (("BRNO", "--priority", "99999999999"), "--priority must be from"),
            (("BRNO", "--lead-time-days", "-1"), "--lead-time-days must be from 0"),
            (("BRNO", "--lead-time-days", "two"), "--lead-time-days must be a whole number"),
            (("BRNO", "--sells", "maybe"), "--sells must be yes or no"),
            (("BRNO", "--sells", ""), "--sells must be yes or no"),
            (("BRNO", "--name", ""), "--name must not be empty"),
            (("BRNO", "--name", "   "), "--name must not be empty"),
            (("BRNO", "--name", "Brno\tbranch"), "--name must not contain control"),
            (("BRNO", "--name", "B" * 256), "--name must be at most 255 characters"),
        ],
    )
    def test_a_malformed_code_or_value_is_refused_and_changes_nothing(self, args, message):
        before = list(Warehouse.objects.values_list("code", "name", "sells", "priority"))

        with pytest.raises(CommandError, match=message):
            _run("create_warehouse", *args)

        assert list(Warehouse.objects.values_list("code", "name", "sells", "priority")) == before

    def test_a_malformed_value_for_an_existing_warehouse_changes_nothing(self):
        _run("create_warehouse", "BRNO", "--priority", "20")

        with pytest.raises(CommandError, match="--sells must be yes or no"):
            _run("create_warehouse", "BRNO", "--priority", "5", "--sells", "perhaps")

        assert _fields("BRNO") == ("BRNO", True, 20, 0)

    def test_from_the_shell_a_malformed_value_exits_non_zero(self, capsys, monkeypatch):
        # manage.py closes the connections when the command ends: the test's must stay open.
        monkeypatch.setattr(connections, "close_all", lambda: None)

        with pytest.raises(SystemExit) as exited:
            call_command_from_argv("create_warehouse", "BRNO", "--lead-time-days", "-3")

        assert exited.value.code != 0
        assert "--lead-time-days must be from 0" in capsys.readouterr().err
        assert not Warehouse.objects.filter(code="BRNO").exists()


def call_command_from_argv(name: str, *args: str) -> None:
    """As `manage.py NAME ARGS` runs it: a CommandError is a message and exit status 1."""
    from django.core.management import load_command_class

    command = load_command_class("stock", name)
    command.run_from_argv(["manage.py", name, *args])


class TestListWarehouses:
    def test_one_tab_separated_line_per_warehouse(self):
        _run(
            "create_warehouse",
            "DROP",
            "--name",
            "Supplier drop-ship",
            "--priority",
            "300",
            "--lead-time-days",
            "5",
            "--sells",
            "no",
        )

        lines = _run("list_warehouses").splitlines()

        assert lines == ["MAIN\tyes\t100\t0\tMAIN", "DROP\tno\t300\t5\tSupplier drop-ship"]

    def test_ordered_by_priority_then_code_by_code_points(self):
        for code, priority in (("b", "10"), ("B", "10"), ("a", "10"), ("Z", "20"), ("_", "10")):
            _run("create_warehouse", code, "--priority", priority)
        _run("create_warehouse", "first", "--priority", "-1")

        codes = [line.split("\t")[0] for line in _run("list_warehouses").splitlines()]

        # "B" (66) < "_" (95) < "a" (97) < "b" (98), whatever the database's collation says.
        assert codes == ["first", "B", "_", "a", "b", "Z", "MAIN"]


class TestSelling:
    """decisions.md: a warehouse that stops selling leaves the sums at once; when it sells
    again, its levels and open reservations count again."""

    def test_stopping_and_resuming_selling_moves_the_shops_figures(self, shop_client):
        from tests.shop.helpers import line, order_body, place

        product = ProductFactory(shop_quantity=10, safety_buffer=0)
        assert place(shop_client, order_body(line(product, 3))).status_code == 201

        def figures() -> tuple:
            response = shop_client.post(
                "/api/v1/shop/stock/query",
                {"keys": [{"stock_code": product.stock_code, "ean": product.ean}]},
                format="json",
            )
            assert response.status_code == 200, response.json()
            found = response.json()["items"][0]
            return (found["shop_quantity"], found["reserved"], found["salable"])

        assert figures() == (10, 3, 7)
        assert _run("create_warehouse", "MAIN", "--sells", "no") == "MAIN updated\n"
        assert figures() == (0, 0, 0)
        assert _run("create_warehouse", "MAIN", "--sells", "yes") == "MAIN updated\n"
        assert figures() == (10, 3, 7)
