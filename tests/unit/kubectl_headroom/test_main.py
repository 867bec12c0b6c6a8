"""``kubectl headroom``'s command line: kubectl's flags anywhere, ``-o`` on every command,
``version``, and one line with the cause, the fix and a distinct exit code when the
cluster cannot be used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubectl_headroom.exits import Exit
from kubectl_headroom.main import main, parser
from kubectl_headroom.version import client_version
from tests.unit.kubectl_headroom.kubeconfigs import context, kubeconfig, write

# Every command that reads the cluster, with the arguments it needs.
COMMANDS = [["preflight"], ["explain", "web-0"], ["status"], ["simulate"], ["version"]]
IDS = [command[0] for command in COMMANDS]


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ~/.kube/config, no $KUBECONFIG and no in-cluster environment unless a test sets one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return tmp_path / "home"


def stderr_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.parametrize(
    "argv",
    [
        ["--kubeconfig", "k", "--context", "c", "preflight"],
        ["preflight", "--kubeconfig", "k", "--context", "c"],
        ["--kubeconfig", "k", "preflight", "--context", "c"],
    ],
    ids=["before", "after", "both-sides"],
)
def test_connection_flags_go_before_or_after_the_subcommand(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    assert (args.kubeconfig, args.context) == ("k", "c")


def test_without_connection_flags_kubectl_defaults_apply() -> None:
    args = parser().parse_args(["status"])
    assert (args.kubeconfig, args.context) == (None, None)


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
@pytest.mark.parametrize("output", ["table", "json", "yaml"])
def test_every_command_takes_every_output(command: list[str], output: str) -> None:
    assert parser().parse_args([*command, "-o", output]).output == output


def test_an_unknown_output_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["status", "-o", "wide"])
    assert exited.value.code == Exit.USAGE
    assert "invalid choice: 'wide'" in capsys.readouterr().err


def test_explain_takes_a_pod_or_a_selector() -> None:
    args = parser().parse_args(["explain", "-l", "app=web", "-n", "team-a"])
    assert (args.pod, args.selector, args.namespace) == (None, "app=web", "team-a")
    # Without -n the context's namespace applies, so nothing is defaulted here.
    assert parser().parse_args(["explain", "web-0"]).namespace is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain"], "explain takes a POD or -l SELECTOR (one of them)"),
        (["explain", "web-0", "-l", "app=web"], "explain takes a POD or -l SELECTOR"),
        (["explain", "-l", "app=web", "--request", "2"], "explain --request takes a POD, not -l"),
    ],
    ids=["neither", "both", "request-with-selector"],
)
def test_explain_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == Exit.USAGE
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "web-0", "--request", "lots"], "error: --request: "),
        (["explain", "-l", "app in (a"], "error: -l 'app in (a': cannot read"),
    ],
    ids=["request", "selector"],
)
def test_bad_input_is_refused_before_any_cluster_is_read(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # No kubeconfig anywhere: had the cluster been read first, this would be exit 4.
    assert main(argv) == Exit.ERROR
    assert stderr_line(capsys).startswith(message)


def test_version_client_reads_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "--client"]) == Exit.OK
    assert capsys.readouterr().out == f"Client Version: {client_version()}\n"
    assert main(["version", "--client", "-o", "json"]) == Exit.OK
    assert json.loads(capsys.readouterr().out) == {"clientVersion": client_version()}
    assert main(["version", "--client", "-o", "yaml"]) == Exit.OK
    assert yaml.safe_load(capsys.readouterr().out) == {"clientVersion": client_version()}


def test_the_client_version_is_the_packages_and_the_charts() -> None:
    repo = Path(__file__).resolve().parents[3]
    chart = yaml.safe_load((repo / "chart" / "kube-headroom" / "Chart.yaml").read_text())
    assert client_version() == chart["appVersion"]


def test_dash_dash_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kubectl-headroom {client_version()}\n"


def test_exit_codes_are_distinct() -> None:
    # No code is an alias of another (`unique` refuses one at import).
    assert len(Exit.__members__) == len(set(Exit))
    assert Exit.BLOCKED not in {Exit.KUBECONFIG, Exit.UNREACHABLE, Exit.DENIED}


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_an_unreachable_api_server(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens on port 1: the connection is refused, as by a cluster that is down.
    path = write(tmp_path / "config", kubeconfig(server="https://127.0.0.1:1"))
    assert main([*command, "--kubeconfig", str(path)]) == Exit.UNREACHABLE
    line = stderr_line(capsys)
    assert line.startswith(
        f'error: cannot reach the API server https://127.0.0.1:1 (context "ctx" of kubeconfig '
        f"{path}): GET /version: Cannot connect to host 127.0.0.1:1"
    )
    assert line.endswith("check that the cluster is up and reachable from here, and the "
                         "kubeconfig's server address and certificate authority")  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_missing_kubeconfig(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    assert main(command) == Exit.KUBECONFIG
    assert stderr_line(capsys).startswith(
        "error: kubeconfig /nonexistent (from $KUBECONFIG) does not exist: set KUBECONFIG"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(
            None,
            "error: no kubeconfig: $KUBECONFIG is empty and {home}/.kube/config does not exist: "
            "set KUBECONFIG to your kubeconfig file, or pass --kubeconfig FILE",
            id="empty-variable",
        ),
        pytest.param(
            "clusters: [\n",
            "error: kubeconfig {path} is not valid YAML at line 2: fix the file, or point "
            "$KUBECONFIG at a valid kubeconfig",
            id="invalid-yaml",
        ),
    ],
)
def test_a_kubeconfig_variable_naming_nothing_usable(
    command: list[str],
    content: str | None,
    message: str,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No content leaves $KUBECONFIG empty; otherwise it names a file holding the content.
    path = None if content is None else write(tmp_path / "config", content)
    monkeypatch.setenv("KUBECONFIG", "" if path is None else str(path))
    assert main(command) == Exit.KUBECONFIG
    assert stderr_line(capsys) == message.format(home=home, path=path)


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_missing_context(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "config", kubeconfig(contexts=[context("ctx"), context("dev")]))
    assert main([*command, "--kubeconfig", str(path), "--context", "prod"]) == (Exit.KUBECONFIG)
    assert stderr_line(capsys) == (
        f'error: context "prod" (--context) is not in kubeconfig {path} (contexts: ctx, dev): '
        "pass --context with one of them, or run kubectl config use-context NAME"
    )


def test_credentials_the_client_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = kubeconfig()
    document["clusters"][0]["cluster"] = {
        "server": "https://127.0.0.1:1",
        "certificate-authority": str(tmp_path / "no-such-ca.crt"),
    }
    path = write(tmp_path / "config", document)
    assert main(["status", "--kubeconfig", str(path)]) == Exit.KUBECONFIG
    line = stderr_line(capsys)
    assert line.startswith(f'error: cannot use context "ctx" of kubeconfig {path}: ')
    assert "no-such-ca.crt" in line
    assert line.endswith("fix its cluster or user entry")
