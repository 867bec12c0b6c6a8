""" "What Headroom buys", in the runbook and the tenant guide: the tenant benchmark's table,
with a row for every booking and limit mode ``bench/tenant_bench.py`` runs, and the make
target that reproduces it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.tenant_bench import BOOKINGS
from bench.tenant_figures import MODES
from tests.unit.docs.markdown import (
    REPO_ROOT,
    RUNBOOK,
    TENANT_GUIDE,
    code_spans,
    section,
    table_rows,
)

TITLE = "What Headroom buys"


@pytest.mark.parametrize("page", [RUNBOOK, TENANT_GUIDE], ids=lambda p: p.name)
def test_the_page_gives_the_benchmarks_table_and_its_command(page: Path) -> None:
    body = section(page.read_text(), TITLE)
    assert "make bench-tenant" in code_spans(body)
    cases = {(row[0], row[1]) for row in table_rows(body)}
    assert cases == {(f"`{name}`", f"`{mode}`") for name, _, _ in BOOKINGS for mode in MODES}


def test_the_command_is_a_make_target() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^bench-tenant:", makefile, re.MULTILINE)
