import json
import logging
import sys

import pytest

from webhook.logs import JsonFormatter, configure_logging


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("webhook.app", logging.INFO, __file__, 1, "denied %s", ("x",), None)
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_message_level_logger_and_context() -> None:
    line = json.loads(JsonFormatter().format(_record(uid="u1", object="team-a/web")))
    assert line["msg"] == "denied x"
    assert line["level"] == "info"
    assert line["logger"] == "webhook.app"
    assert (line["uid"], line["object"]) == ("u1", "team-a/web")
    assert line["ts"].endswith("+00:00")


def test_exceptions_are_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in line["error"]


@pytest.mark.parametrize(
    ("fmt", "formatter"), [("json", JsonFormatter), ("text", logging.Formatter)]
)
def test_configure_logging_installs_one_handler(fmt: str, formatter: type) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging(fmt=fmt, level="debug")
        [handler] = root.handlers
        assert type(handler.formatter) is formatter
        assert root.level == logging.DEBUG
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
