"""``kubectl headroom version``: the plugin's version and, unless ``--client``, the server's."""

from importlib import metadata
from typing import Final

from kubectl_headroom.output import emit

DISTRIBUTION: Final = "kube-headroom"


def client_version() -> str:
    """The installed package's version: the console script exists only once installed."""
    return metadata.version(DISTRIBUTION)


def show(output: str, *, server: str | None) -> None:
    """Print the versions; ``server`` is the API server's gitVersion (None: not asked)."""
    document = {"clientVersion": client_version()}
    if server is not None:
        document["serverVersion"] = server
    if output != "table":
        emit(document, output)
        return
    print(f"Client Version: {document['clientVersion']}")
    if server is not None:
        print(f"Server Version: {server}")
