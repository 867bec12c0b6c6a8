"""Kubernetes version strings as the API server and kubelets report them."""

from app.core.nodes import MINIMUM_RESIZE_VERSION, major_minor


def supported(text: str) -> bool | None:
    """Whether a control plane of this version can resize pods in place; None if unknown."""
    version = major_minor(text)
    return None if version is None else version >= MINIMUM_RESIZE_VERSION
