"""docs/architecture.md names only what exists: every file and package, every class,
function and method, and every layer the import contracts check."""

import ast
import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Final

import pytest

from tests.unit.docs.markdown import DOCS_DIR, REPO_ROOT

ARCHITECTURE: Final = DOCS_DIR / "architecture.md"
PRODUCTION: Final = ("app", "certs", "reconciler", "webhook", "kubectl_headroom")
_CODE: Final = re.compile(r"`([^`\s]+)`")
_PATH: Final = re.compile(r"^[a-z_]+(/[\w.-]+)*/?$")
_NAME: Final = re.compile(r"^([A-Z]\w*\.)?[A-Za-z_]\w*(\(.*\))?$")


def _spans() -> list[str]:
    return _CODE.findall(ARCHITECTURE.read_text())


@cache
def _defined() -> frozenset[str]:
    """Every class, function and `Class.method` defined in the production packages, and
    the words their string literals spell (event reasons and the like)."""
    names: set[str] = set()
    for tree in PRODUCTION:
        for path in (REPO_ROOT / tree).rglob("*.py"):
            module = ast.parse(path.read_text())
            for node in ast.walk(module):
                if isinstance(node, ast.ClassDef):
                    names.add(node.name)
                    names.update(
                        f"{node.name}.{item.name}"
                        for item in node.body
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    )
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names.add(node.value)
    return frozenset(names)


def _paths() -> list[str]:
    """Spans that name something in the repository (not API paths such as pods/resize)."""
    tops = {path.name for path in REPO_ROOT.iterdir()}
    return sorted(
        {
            span
            for span in _spans()
            if "/" in span and _PATH.match(span) and span.split("/")[0] in tops
        }
    )


def _names() -> list[str]:
    names = set()
    for span in _spans():
        if "/" in span or "." in span.split("(")[0].lstrip("abcdefghijklmnopqrstuvwxyz_"):
            continue
        if _NAME.match(span) and ("_" in span or span[0].isupper() or "." in span):
            names.add(span.split("(")[0])
    return sorted(names)


@pytest.mark.parametrize("path", _paths())
def test_every_path_it_names_exists(path: str) -> None:
    assert (REPO_ROOT / path.rstrip("/")).exists(), path


@pytest.mark.parametrize("name", _names())
def test_every_class_and_function_it_names_is_defined(name: str) -> None:
    assert name in _defined(), name


def test_it_names_every_production_module() -> None:
    """A newcomer finds each module's job here, or in the table of its package."""
    text = ARCHITECTURE.read_text()
    missing = [
        str(path.relative_to(REPO_ROOT))
        for tree in ("app", "reconciler")
        for path in sorted((REPO_ROOT / tree).rglob("*.py"))
        if path.name != "__init__.py"
        and str(path.relative_to(REPO_ROOT)) not in text
        and str(path.parent.relative_to(REPO_ROOT)) + "/" not in text
    ]
    assert missing == []


def test_its_layers_are_the_import_contracts() -> None:
    contracts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in contracts["contracts"] if c["type"] == "layers")["layers"]
    text = ARCHITECTURE.read_text()
    assert all(f"`{layer}`" in text for layer in layers)
    assert "lint-imports" in text


def test_readme_and_development_link_it() -> None:
    for page in (REPO_ROOT / "README.md", DOCS_DIR / "development.md"):
        assert "architecture.md" in Path(page).read_text(), page
