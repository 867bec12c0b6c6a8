import json
import logging
import sys

import pytest

from app.io.logs import JsonFormatter, TextFormatter, configure_logging


def record(message: str = "resized %s", *args: object, **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("reconciler.reconcile", logging.INFO, "x.py", 1, message, args, None)
    for key, value in extra.items():
        setattr(entry, key, value)
    return entry


def test_json_lines_carry_the_object_context() -> None:
    line = JsonFormatter().format(record("resized %s", "p", namespace="team-a", pod="p"))
    decoded = json.loads(line)
    assert decoded["level"] == "info"
    assert decoded["logger"] == "reconciler.reconcile"
    assert decoded["msg"] == "resized p"
    assert (decoded["namespace"], decoded["pod"]) == ("team-a", "p")
    assert decoded["ts"].endswith("+00:00")


def test_json_lines_include_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        entry = logging.LogRecord(
            "x", logging.ERROR, "x.py", 1, "failed", None, exc_info=sys.exc_info()
        )
    decoded = json.loads(JsonFormatter().format(entry))
    assert "ValueError: boom" in decoded["error"]


def test_text_lines_append_the_context() -> None:
    line = TextFormatter().format(record("resized %s", "p", node="n1", color_message="x"))
    assert line.endswith("reconciler.reconcile: resized p node=n1")


@pytest.mark.parametrize(
    ("log_format", "formatter"),
    [
        pytest.param("json", JsonFormatter, id="json"),
        pytest.param("text", TextFormatter, id="text"),
    ],
)
def test_configure_installs_one_handler(log_format: str, formatter: type) -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging(log_format=log_format, level="warning")
        assert [type(h.formatter) for h in root.handlers] == [formatter]
        assert root.level == logging.WARNING
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
