"""Process logging: JSON lines (default) or text, set up by the entry point, never at import."""

import datetime
import logging
import sys
from typing import Final

import orjson

# Attributes every LogRecord has; anything else was passed in ``extra`` and is logged too.
_STANDARD_ATTRS: Final = frozenset(vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)))
_FORMATTED_ATTRS: Final = frozenset({"message", "asctime"})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in _FORMATTED_ATTRS:
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(*, fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
