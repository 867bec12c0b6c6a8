"""Why a command could not talk to the cluster, in one line with the fix, and its exit code."""

from dataclasses import dataclass
from typing import Final

from app.io.http import ApiError, ApiUnavailable
from app.io.kubeconfig import KubeConfigError
from kubectl_headroom.exits import Exit
from kubectl_headroom.kubeconfig import KubeconfigProblem, Target

PERMISSIONS: Final = "docs/operator-runbook.md#plugin-permissions"
_UNAUTHORIZED: Final = 401
_FORBIDDEN: Final = 403

Failure = KubeconfigProblem | KubeConfigError | ApiUnavailable | ApiError
FAILURES: Final = (KubeconfigProblem, KubeConfigError, ApiUnavailable, ApiError)


@dataclass(frozen=True)
class Report:
    message: str
    code: int

    @property
    def line(self) -> str:
        # One line, whatever the server or a library put in its message.
        return "error: " + " ".join(self.message.split())


def report(err: Failure, *, target: Target | None, command: str) -> Report:
    if isinstance(err, KubeconfigProblem):
        return Report(str(err), Exit.KUBECONFIG)
    where = "the cluster" if target is None else target.describe()
    if isinstance(err, KubeConfigError):
        # What the client still refuses once the files read well: a certificate file that
        # is missing, an exec credential plugin that fails.
        return Report(
            f"cannot use {where}: {err.__cause__ or err}: fix its cluster or user entry",
            Exit.KUBECONFIG,
        )
    server = "" if target is None else f" {target.server}"
    if isinstance(err, ApiUnavailable):
        return Report(
            f"cannot reach the API server{server} ({where}): {err}: check that the cluster "
            "is up and reachable from here, and the kubeconfig's server address and "
            "certificate authority",
            Exit.UNREACHABLE,
        )
    if err.status == _UNAUTHORIZED:
        return Report(
            f"the API server{server} rejected the credentials of {where} (401 Unauthorized): "
            "log in again, or renew the user's token or certificate",
            Exit.DENIED,
        )
    if err.status == _FORBIDDEN:
        return Report(
            f"{err.message} (403 Forbidden): kubectl headroom {command} needs get and list on "
            f"what it reads; ask for them (see {PERMISSIONS})",
            Exit.DENIED,
        )
    return Report(f"the API server answered {err}", Exit.ERROR)
