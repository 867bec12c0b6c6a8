"""Kubernetes version strings as the API server and kubelets report them."""

import re

_VERSION = re.compile(r"^v?(\d+)\.(\d+)")
# In-place pod resize is GA (and on by default) from this minor.
MINIMUM = (1, 35)


def major_minor(text: str) -> tuple[int, int] | None:
    """(1, 37) from "v1.37.2", "v1.37.2-gke.1" or "1.37"; None when unparseable."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def supported(text: str) -> bool | None:
    version = major_minor(text)
    return None if version is None else version >= MINIMUM
