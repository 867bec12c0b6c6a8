"""Plain column output, kubectl style."""

from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [headers, *rows]
    widths = [max(map(len, column)) for column in zip(*lines, strict=True)]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
