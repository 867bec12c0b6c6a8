"""Links into the docs resolve: from the code, the chart and the dashboard, and between pages."""

import re
from pathlib import Path
from typing import Final

import pytest

from tests.unit.docs.markdown import (
    DOCS_DIR,
    REPO_ROOT,
    RUNBOOK,
    anchors,
    headings,
    section,
    user_docs,
)

# Where messages, alerts and panels send operators to the docs.
LINKING_TREES: Final = (
    "app",
    "certs",
    "webhook",
    "reconciler",
    "kubectl_headroom",
    "chart",
    "dashboards",
)
_DOC_REFERENCE: Final = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")
# A page named with or without an anchor.
_DOC_PAGE: Final = re.compile(r"docs/([\w-]+\.md)")
_MARKDOWN_LINK: Final = re.compile(r"\]\(([^)\s]*)\)")


def _linking_files() -> list[Path]:
    return [
        path
        for tree in LINKING_TREES
        for path in sorted((REPO_ROOT / tree).rglob("*"))
        if path.is_file() and path.suffix in {".py", ".yaml", ".tpl", ".txt", ".json"}
    ]


def _references_from_code() -> list[tuple[str, str, str]]:
    """(file that links, doc, anchor) for every ``docs/<page>.md#<anchor>`` in the trees."""
    return [
        (path.relative_to(REPO_ROOT).as_posix(), doc, fragment)
        for path in _linking_files()
        for doc, fragment in _DOC_REFERENCE.findall(path.read_text())
    ]


def _pages_from_code() -> list[tuple[str, str]]:
    """(file that names it, doc) for every ``docs/<page>.md`` in the trees."""
    return [
        (path.relative_to(REPO_ROOT).as_posix(), doc)
        for path in _linking_files()
        for doc in _DOC_PAGE.findall(path.read_text())
    ]


@pytest.mark.parametrize(("source", "doc"), _pages_from_code())
def test_pages_named_in_code_exist(source: str, doc: str) -> None:
    assert (DOCS_DIR / doc).is_file(), f"{source} names missing docs/{doc}"


@pytest.mark.parametrize(("source", "doc", "fragment"), _references_from_code())
def test_links_from_code_resolve(source: str, doc: str, fragment: str) -> None:
    page = DOCS_DIR / doc
    assert page.is_file(), f"{source} links to missing {doc}"
    assert fragment in anchors(page.read_text()), f"{source} links to missing {doc}#{fragment}"


def _doc_links() -> list[tuple[str, str]]:
    return [
        (doc.name, target)
        for doc in user_docs()
        for target in _MARKDOWN_LINK.findall(doc.read_text())
        if not re.match(r"[a-z]+:", target)
    ]


@pytest.mark.parametrize(("doc", "target"), _doc_links())
def test_links_between_docs_resolve(doc: str, target: str) -> None:
    source = next(d for d in user_docs() if d.name == doc)
    path, _, fragment = target.partition("#")
    page = (source.parent / path).resolve() if path else source
    assert page.is_file(), f"{doc} links to missing {path}"
    if fragment:
        assert fragment in anchors(page.read_text()), f"{doc} links to missing {target}"


# Sections the alerts, the dashboard and the webhook's messages name in words.
NAMED_SECTIONS: Final = [
    ("chart/kube-headroom/templates/prometheusrule.yaml", "Resize outcomes"),
    ("chart/kube-headroom/templates/prometheusrule.yaml", "Preflight"),
    ("chart/kube-headroom/templates/prometheusrule.yaml", "Failure modes"),
    ("chart/kube-headroom/templates/prometheusrule.yaml", "API-server pressure"),
    ("dashboards/headroom.json", "Resize outcomes"),
    ("dashboards/headroom.json", "Preflight"),
    ("dashboards/headroom.json", "Failure modes"),
    ("webhook/handlers/decision.py", "Preflight"),
]


@pytest.mark.parametrize(
    ("source", "title"), NAMED_SECTIONS, ids=[f"{s}:{t}" for s, t in NAMED_SECTIONS]
)
def test_sections_named_elsewhere_exist(source: str, title: str) -> None:
    assert title in Path(REPO_ROOT / source).read_text()
    assert title in {heading.title for heading in headings(RUNBOOK.read_text())}


def test_preflight_has_the_item_the_quota_messages_quote() -> None:
    assert "ResourceQuota: requests.cpu only" in section(RUNBOOK.read_text(), "Preflight")
