"""Checks shared by the tests of every command line."""

from collections.abc import Callable, Sequence

import pytest


def usage_error(
    parse: Callable[[Sequence[str]], object],
    argv: Sequence[str],
    capsys: pytest.CaptureFixture[str],
) -> str:
    """What the command printed when it refused the arguments; refusing is exit code 2."""
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err
