"""Names the docs teach (reasons, annotation fields, events, Helm values) are the code's names."""

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import pytest
import yaml

from app.core.eligibility import Ineligible
from app.core.explain import Explanation, status_annotation
from reconciler.bodies import EventReason
from tests.unit.docs.markdown import (
    REPO_ROOT,
    RUNBOOK,
    TENANT_GUIDE,
    code_spans,
    section,
    shell_commands,
    table_rows,
    user_docs,
)

CHART_VALUES: Final = REPO_ROOT / "chart" / "kube-headroom" / "values.yaml"
_SET_FLAG: Final = re.compile(r"--set ([\w.]+)=")


def _first_column(text: str, title: str) -> list[str]:
    return [code for row in table_rows(section(text, title)) for code in code_spans(row[0])]


def explanation(**overrides: Any) -> Explanation:
    fields: dict[str, Any] = {
        "factor": "1.00",
        # Overbooked, so every field the annotation can carry is written.
        "slack_m": 0,
        "overbooked_m": 2000,
        "allocatable_m": 16000,
        "managed_m": 8000,
        "node_pods": 3,
        "current_m": 1500,
        "target_m": 3000,
        "vpa_upper_bound_m": 2500,
        "dry_run": True,
    }
    return Explanation(**(fields | overrides))


def test_ineligibility_reasons_are_the_gates_the_code_checks() -> None:
    listed = _first_column(TENANT_GUIDE.read_text(), "Is my pod managed?")
    assert sorted(listed) == sorted(Ineligible)


def test_annotation_fields_are_the_fields_written() -> None:
    written = json.loads(
        status_annotation(
            explanation(dry_run=True, pool="web"), previous=None, now=datetime.now(UTC)
        )
    )
    assert sorted(_first_column(TENANT_GUIDE.read_text(), "The status annotation")) == sorted(
        written
    )


def test_event_reasons_are_the_events_recorded() -> None:
    listed = _first_column(RUNBOOK.read_text(), "Events")
    assert sorted(listed) == sorted(EventReason)


def _has_value(values: Mapping[str, Any], dotted: str) -> bool:
    node: Any = values
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _helm_values_named() -> list[str]:
    """Values named in the Install table and set by helm commands (``kubectl headroom
    simulate --set`` sets HeadroomConfig fields, not Helm values)."""
    named = _first_column(RUNBOOK.read_text(), "Install")
    for doc in user_docs():
        for command in shell_commands(doc.read_text()):
            if command.startswith("helm "):
                named.extend(_SET_FLAG.findall(command))
    return named


@pytest.mark.parametrize("dotted", sorted(set(_helm_values_named())))
def test_helm_values_named_in_docs_exist(dotted: str) -> None:
    assert _has_value(yaml.safe_load(CHART_VALUES.read_text()), dotted)
