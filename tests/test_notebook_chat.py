"""The chat and agent notebook, in a test file of its own so that ``--dist loadfile`` runs it beside the
other long ones (tests/notebook_run.py)."""

from tests.notebook_run import notebook_test

test_notebook_runs = notebook_test("chat")
