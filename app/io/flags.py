"""Command-line flag types the reconciler and the webhook share."""

import argparse

from app.io.metrics_server import parse_bind_address


def boolean(text: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``t``/``f``, ``yes``/``no``), in any case."""
    value = text.strip().lower()
    if value in ("true", "1", "t", "yes"):
        return True
    if value in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def bind_address(text: str) -> str:
    """``[HOST]:PORT``, checked as the listeners will read it."""
    try:
        parse_bind_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return text
