"""kubectl's label selector strings (``-l``): ``app=web,tier!=db,env in (a,b),!canary``."""

import re
from typing import Final

from app.core.config import LabelSelector, Operator, Requirement

_SET: Final = re.compile(
    r"^\s*(!?)\s*([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\)|(==|=|!=)\s*([^\s,()]*))?\s*$"
)


class SelectorSyntaxError(ValueError):
    pass


def parse_selector(text: str) -> LabelSelector:
    """The requirements of a kubectl ``-l`` selector; all must hold."""
    requirements = []
    for part in _split(text):
        match = _SET.match(part)
        if match is None:
            raise SelectorSyntaxError(f"-l {text!r}: cannot read {part.strip()!r}")
        negated, key, set_operator, values, operator, value = match.groups()
        if negated and (set_operator or operator):
            raise SelectorSyntaxError(f"-l {text!r}: '!' takes a key alone, as in !{key}")
        if set_operator:
            members = frozenset(v.strip() for v in values.split(",") if v.strip())
            kind = Operator.IN if set_operator == "in" else Operator.NOT_IN
            requirements.append(Requirement(key, kind, members))
        elif operator:
            kind = Operator.NOT_IN if operator == "!=" else Operator.IN
            requirements.append(Requirement(key, kind, frozenset({value})))
        else:
            kind = Operator.DOES_NOT_EXIST if negated else Operator.EXISTS
            requirements.append(Requirement(key, kind, frozenset()))
    return LabelSelector(tuple(requirements))


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth = start = 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part for part in parts if part.strip()]
