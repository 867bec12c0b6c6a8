"""``-o``: a table for people by default, JSON or YAML for tools, on every command."""

import argparse
import sys
from typing import Any, Final, TextIO

import orjson
import yaml

FORMATS: Final = ("table", "json", "yaml")


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", "-o", choices=FORMATS, default="table", help="table (default), json or yaml"
    )


def emit(document: Any, output: str, *, stream: TextIO | None = None) -> None:
    """Print ``document`` as JSON or YAML (``output`` is one of them)."""
    out = sys.stdout if stream is None else stream
    if output == "json":
        # orjson: the standard library takes seconds over a hundred thousand pods.
        out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(yaml.safe_dump(document, sort_keys=False))
