"""The docs name only series Headroom exports, with their real labels and result values."""

import re
from typing import Final

import pytest

from reconciler.outcomes import Result
from tests.unit.dashboards.promql import EXPORTED_METRICS, queryable_series
from tests.unit.docs.markdown import RUNBOOK, code_spans, section, table_rows, user_docs

_SERIES: Final = re.compile(r"\bheadroom_[a-z0-9_]*[a-z0-9]\b")
# `name{a,b}` lists the series' labels; `name{a="x"}` selects by one.
_LABELLED: Final = re.compile(r"\b(headroom_[a-z0-9_]+)\{([^}]*)\}")
_MATCHER: Final = re.compile(r'(\w+)\s*(?:=~|!~|!=|=)\s*"([^"]*)"')
_RESULT: Final = re.compile(r'\bresult="([^"]*)"')
RESULTS: Final = frozenset(Result)
# The developer guide names test fixtures (headroom_crd), not series.
_NOT_ABOUT_METRICS: Final = frozenset({"development.md"})


def _docs_text() -> dict[str, str]:
    return {doc.name: doc.read_text() for doc in user_docs() if doc.name not in _NOT_ABOUT_METRICS}


def _known_names() -> set[str]:
    """Exported names, histograms both by base name and by their _bucket/_sum/_count."""
    return set(queryable_series()) | set(EXPORTED_METRICS)


@pytest.mark.parametrize("doc", list(_docs_text()))
def test_docs_name_only_exported_series(doc: str) -> None:
    unknown = set(_SERIES.findall(_docs_text()[doc])) - _known_names()
    assert not unknown, f"{doc} names series Headroom does not export: {sorted(unknown)}"


@pytest.mark.parametrize("doc", list(_docs_text()))
def test_labels_in_docs_are_the_series_labels(doc: str) -> None:
    series = {**EXPORTED_METRICS, **queryable_series()}
    for name, inside in _LABELLED.findall(_docs_text()[doc]):
        labels = series.get(name, frozenset())
        matchers = _MATCHER.findall(inside)
        if matchers:
            assert {label for label, _ in matchers} <= labels, f"{name}{{{inside}}}"
        else:
            listed = {label.strip() for label in inside.split(",")}
            assert listed == labels, f"{name}{{{inside}}} but the series has {sorted(labels)}"


@pytest.mark.parametrize("doc", list(_docs_text()))
def test_result_values_in_docs_are_real_outcomes(doc: str) -> None:
    values = set(_RESULT.findall(_docs_text()[doc]))
    assert values <= RESULTS, f"{doc}: not resize outcomes: {sorted(values - RESULTS)}"


@pytest.mark.parametrize("name", sorted(EXPORTED_METRICS))
def test_runbook_documents_every_exported_series(name: str) -> None:
    assert name in section(RUNBOOK.read_text(), "Metrics and alerts")


def test_outcomes_table_lists_every_result_once() -> None:
    rows = table_rows(section(RUNBOOK.read_text(), "Resize outcomes"))
    listed = [code_spans(row[0])[0] for row in rows]
    assert sorted(listed) == sorted(RESULTS)
