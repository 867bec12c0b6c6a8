"""Structured process logs: one JSON object per line, or readable text for local runs.

Configured once by the entry point; library modules only call `logging.getLogger`.
Fields passed through `extra=` (namespace, pod, node, ...) appear as top-level keys in
JSON and as `key=value` pairs in text.
"""

import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final

import orjson

# Attributes every LogRecord has; anything else on a record came from `extra=`. uvicorn
# adds a terminal-coloured copy of its messages, which is noise here.
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName", "color_message"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            payload["error"] = self.formatException(record.exc_info)
        return orjson.dumps(payload, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = _extras(record)
        if not extras:
            return text
        pairs = " ".join(f"{key}={value}" for key, value in extras.items())
        head, newline, rest = text.partition("\n")
        return f"{head} {pairs}{newline}{rest}"


def configure_logging(*, log_format: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
