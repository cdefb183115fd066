"""Run only by tests/docs/test_required_tools.py (the name keeps it out of the suite): tests
that need tools no machine has, found the ways the suite's tests find theirs."""

from tests.environment import needs_tool, require_tool

ABSENT = "stock-sync-absent-tool"


@needs_tool(ABSENT, "stock-sync-absent-package")
def test_marked_as_needing_an_absent_tool():
    raise AssertionError("never runs: the tool is missing")


def test_asking_for_an_absent_tool():
    require_tool(ABSENT, "stock-sync-absent-package")
    raise AssertionError("never runs: the tool is missing")


@needs_tool("sh", "dash")
def test_marked_as_needing_a_tool_that_is_there():
    pass
