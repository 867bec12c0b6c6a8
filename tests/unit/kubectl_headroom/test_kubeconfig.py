"""Finding the kubeconfig, context and namespace as kubectl does, with errors that say the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_headroom.kubeconfig import KubeconfigProblem, resolve
from tests.unit.kubectl_headroom.kubeconfigs import context, kubeconfig, write


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home without ~/.kube/config, and no in-cluster environment."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def problem(**kwargs: object) -> str:
    with pytest.raises(KubeconfigProblem) as raised:
        resolve(**kwargs)  # type: ignore[arg-type]
    return str(raised.value)


def test_the_flag_wins_over_the_environment(tmp_path: Path) -> None:
    flag = write(tmp_path / "flag", kubeconfig(server="https://10.0.0.1:6443"))
    env = write(tmp_path / "env", kubeconfig(server="https://10.0.0.2:6443"))
    target = resolve(flag=str(flag), context=None, environ={"KUBECONFIG": str(env)})
    assert (target.paths, target.server, target.source) == (
        (flag,),
        "https://10.0.0.1:6443",
        "--kubeconfig",
    )
    assert target.kubeconfig == str(flag)


def test_kubeconfig_lists_files_merged_first_wins(tmp_path: Path) -> None:
    first = write(
        tmp_path / "a",
        kubeconfig(contexts=[context("ctx", namespace="team-a")], current=None),
    )
    second = write(
        tmp_path / "b",
        kubeconfig(contexts=[context("ctx", namespace="team-b"), context("other")]),
    )
    missing = tmp_path / "missing"
    target = resolve(flag=None, context=None, environ={"KUBECONFIG": f"{first}:{missing}:{second}"})
    # The first file without a current-context leaves it to the second; the first "ctx" wins.
    assert (target.context, target.namespace) == ("ctx", "team-a")
    assert target.paths == (first, second)
    assert target.kubeconfig == f"{first}:{second}"


def test_the_contexts_namespace_is_the_default(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        kubeconfig(contexts=[context("ctx"), context("dev", namespace="team-dev")]),
    )
    assert resolve(flag=str(path), context=None, environ={}).namespace == "default"
    picked = resolve(flag=str(path), context="dev", environ={})
    assert (picked.context, picked.namespace) == ("dev", "team-dev")


def test_unset_or_empty_kubeconfig_means_the_home_file(home: Path) -> None:
    (home / ".kube").mkdir(parents=True)
    default = write(home / ".kube" / "config", kubeconfig())
    for environ in ({}, {"KUBECONFIG": ""}):
        assert resolve(flag=None, context=None, environ=environ).paths == (default,)


def test_a_missing_flag_file_names_the_flag(tmp_path: Path) -> None:
    message = problem(flag=str(tmp_path / "nope"), context=None, environ={})
    assert message == (
        f"kubeconfig {tmp_path}/nope (from --kubeconfig) does not exist: pass the path of an "
        "existing kubeconfig file"
    )


def test_a_missing_kubeconfig_names_the_variable_and_the_fix(home: Path) -> None:
    message = problem(flag=None, context=None, environ={"KUBECONFIG": "/nonexistent"})
    assert message == (
        "kubeconfig /nonexistent (from $KUBECONFIG) does not exist: set KUBECONFIG to your "
        f"kubeconfig file (or unset it to use {home}/.kube/config), or pass --kubeconfig FILE"
    )


@pytest.mark.parametrize(("environ", "state"), [({"KUBECONFIG": ""}, "empty"), ({}, "unset")])
def test_no_kubeconfig_at_all_says_where_it_looked(
    home: Path, environ: dict[str, str], state: str
) -> None:
    assert problem(flag=None, context=None, environ=environ) == (
        f"no kubeconfig: $KUBECONFIG is {state} and {home}/.kube/config does not exist: set "
        "KUBECONFIG to your kubeconfig file, or pass --kubeconfig FILE"
    )


def test_an_empty_flag_is_refused() -> None:
    assert problem(flag="", context=None, environ={}).startswith("--kubeconfig is empty")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("clusters: [\n", "is not valid YAML at line 2"),
        ("- a\n- b\n", "is not a kubeconfig (a mapping with clusters, users and contexts)"),
        ("contexts: {a: b}\n", "contexts is not a list of named entries"),
        ("", "defines no contexts (is it a kubeconfig?)"),
    ],
    ids=["yaml", "not-a-mapping", "bad-section", "empty-file"],
)
def test_an_invalid_kubeconfig_says_what_is_wrong(
    tmp_path: Path, content: str, expected: str
) -> None:
    path = write(tmp_path / "config", content)
    message = problem(flag=None, context=None, environ={"KUBECONFIG": str(path)})
    assert message.startswith(f"kubeconfig {path}")
    assert expected in message
    assert message.endswith(
        (
            "point $KUBECONFIG at a valid kubeconfig",
            "point $KUBECONFIG at your cluster's kubeconfig",
        )
    )


def test_a_missing_context_lists_the_ones_there(tmp_path: Path) -> None:
    path = write(tmp_path / "config", kubeconfig(contexts=[context("a"), context("b")]))
    assert problem(flag=str(path), context="prod", environ={}) == (
        f'context "prod" (--context) is not in kubeconfig {path} (contexts: a, b): pass '
        "--context with one of them, or run kubectl config use-context NAME"
    )
    assert '"ctx" (its current-context) is not in' in problem(
        flag=str(path), context=None, environ={}
    )


def test_no_current_context_asks_for_one(tmp_path: Path) -> None:
    path = write(tmp_path / "config", kubeconfig(current=None))
    assert problem(flag=str(path), context=None, environ={}) == (
        f"kubeconfig {path} sets no current-context: pass --context NAME (contexts: ctx) or "
        "run kubectl config use-context NAME"
    )


def test_a_context_without_its_cluster_or_server(tmp_path: Path) -> None:
    orphan = write(tmp_path / "orphan", kubeconfig(cluster="elsewhere"))
    assert 'names cluster "c", which kubeconfig' in problem(
        flag=str(orphan), context=None, environ={}
    )
    serverless = write(tmp_path / "serverless", kubeconfig(server=""))
    assert problem(flag=str(serverless), context=None, environ={}).endswith(
        "has no server: add its API server URL"
    )


def test_in_cluster_credentials_when_no_file_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    target = resolve(
        flag=None,
        context=None,
        environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
    )
    assert (target.paths, target.kubeconfig, target.context) == ((), None, None)
    assert target.server == "https://10.96.0.1:443"
    assert target.describe() == "the pod's in-cluster credentials"


def test_a_context_flag_needs_a_kubeconfig() -> None:
    message = problem(flag=None, context="prod", environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert message.startswith("--context prod: no kubeconfig to find it in")
