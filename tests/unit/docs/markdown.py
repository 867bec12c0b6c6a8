"""Just enough Markdown reading to check the user docs against the code.

Fenced code blocks, the shell commands in them, headings and their anchors, sections and
pipe tables: the subset the docs use, not a general parser.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[3]
DOCS_DIR: Final = REPO_ROOT / "docs"
RUNBOOK: Final = DOCS_DIR / "operator-runbook.md"
TENANT_GUIDE: Final = DOCS_DIR / "tenant-guide.md"
APPLICABILITY: Final = DOCS_DIR / "applicability.md"
CONFIGURATION: Final = DOCS_DIR / "configuration.md"
README: Final = REPO_ROOT / "README.md"
CHANGELOG: Final = REPO_ROOT / "CHANGELOG.md"
SECURITY: Final = REPO_ROOT / "SECURITY.md"
LICENSE: Final = REPO_ROOT / "LICENSE"

SHELL_LANGUAGES: Final = frozenset({"sh", "bash", "shell", "console"})
_FENCE: Final = re.compile(r"^(\s*)(```|~~~)\s*([\w-]*)")
_HEADING: Final = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN: Final = re.compile(r"`([^`]+)`")


@dataclass(frozen=True, slots=True)
class FencedBlock:
    language: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    title: str
    line: int


def user_docs() -> list[Path]:
    """The README, the changelog, the security policy and every page under docs/."""
    return [README, CHANGELOG, SECURITY, *sorted(DOCS_DIR.glob("*.md"))]


def _scan(text: str) -> Iterator[tuple[int, str, FencedBlock | None]]:
    """Each line outside fences as (index, line, None); each fence once, as its block."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            yield index, lines[index], None
            index += 1
            continue
        indent, marker, language = opening.groups()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != marker:
            # Fences inside list items are indented; their content is relative to the fence.
            body.append(lines[index].removeprefix(indent))
            index += 1
        index += 1
        yield start, "", FencedBlock(language=language.lower(), lines=tuple(body))


def fenced_blocks(text: str) -> list[FencedBlock]:
    return [block for _, _, block in _scan(text) if block is not None]


def strip_comment(command: str) -> str:
    """The command without a trailing ``# comment`` (a ``#`` inside quotes is kept)."""
    quote: str | None = None
    escaped = False
    for position, char in enumerate(command):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (position == 0 or command[position - 1].isspace()):
            return command[:position].rstrip()
    return command


def normalize(command: str) -> str:
    return re.sub(r"\s+", " ", strip_comment(command)).strip()


def shell_commands(text: str) -> list[str]:
    """Commands in sh/bash/shell blocks (every line) and console blocks (``$ `` lines).

    A trailing backslash continues a command on the next line; comments are dropped.
    """
    commands: list[str] = []
    for block in fenced_blocks(text):
        if block.language not in SHELL_LANGUAGES:
            continue
        parts: list[str] | None = None
        for raw in block.lines:
            line = raw.strip()
            if parts is None:
                if block.language == "console":
                    if not line.startswith("$ "):
                        continue
                elif not line or line.startswith("#"):
                    continue
                line = line.removeprefix("$ ")
                parts = []
            parts.append(line.removesuffix("\\"))
            if not line.endswith("\\"):
                commands.append(normalize(" ".join(parts)))
                parts = None
        if parts is not None:
            commands.append(normalize(" ".join(parts)))
    return commands


def headings(text: str) -> list[Heading]:
    found = []
    for index, line, block in _scan(text):
        match = _HEADING.match(line) if block is None else None
        if match is not None:
            found.append(Heading(level=len(match.group(1)), title=match.group(2), line=index))
    return found


def anchor(title: str) -> str:
    """The anchor a heading gets on the forge that renders these docs (GitHub's rule)."""
    plain = title.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {anchor(heading.title) for heading in headings(text)}


def section(text: str, title: str) -> str:
    """The body under the heading ``title``, up to the next heading of its level or above."""
    lines = text.splitlines()
    found = headings(text)
    for position, heading in enumerate(found):
        if heading.title != title:
            continue
        end = next(
            (later.line for later in found[position + 1 :] if later.level <= heading.level),
            len(lines),
        )
        return "\n".join(lines[heading.line + 1 : end])
    raise LookupError(f"no heading {title!r}")


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first pipe table in ``text``, as stripped cells."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            if rows:
                break
            continue
        rows.append([cell.strip() for cell in stripped.strip("|").split("|")])
    if len(rows) < 2:
        raise LookupError("no table")
    return rows[2:]


def code_spans(text: str) -> list[str]:
    return _CODE_SPAN.findall(text)
