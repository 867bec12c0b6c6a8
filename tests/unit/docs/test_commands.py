"""Every shell command the README and docs show is exercised somewhere.

``COVERED`` maps each command, exactly as the docs show it (whitespace collapsed,
continuations joined, comments dropped), to where it runs: a test node id, "demo" for
the end-to-end demo on the embedded cluster, or "ci" for the CI entry point (`.ci/run`).
A doc that gains a command fails here until the command is listed, and a listed command
no doc shows any more fails too.
"""

import re
from pathlib import Path
from typing import Final

import pytest

from tests.unit.docs.markdown import REPO_ROOT, shell_commands, user_docs

DEMO: Final = "demo"
_INSTALL_TESTS = "tests/integration/chart/test_install.py"
_INSTALL = f"{_INSTALL_TESTS}::test_make_install_sample_config_and_uninstall_keeps_both"
_DEPLOY = f"{_INSTALL_TESTS}::test_make_deploy_installs_every_object_and_undeploy_removes_them"
_E2E = "tests/e2e/test_install_path.py"
_OCI = f"{_E2E}::test_runbook_installs_both_charts_and_the_image_from_the_oci_registry"
CI: Final = "ci"
CI_ENTRY_POINT: Final = REPO_ROOT / ".ci" / "run"
_CHART_TESTS: Final = "tests/unit/chart/test_toggles.py"
_PLUGIN_INSTALL: Final = (
    "tests/integration/kubectl_headroom/test_install_plugin.py::"
    "test_the_install_commands_put_the_plugin_on_path"
)
_TROUBLESHOOTING: Final = (
    f"{_INSTALL_TESTS}::"
    "test_the_troubleshooting_commands_show_a_missing_ca_and_the_webhooks_endpoints"
)
_UNINSTALL: Final = f"{_INSTALL_TESTS}::test_the_uninstall_recipe_leaves_nothing_behind"
_SIMULATE_OFFLINE: Final = (
    "tests/integration/reconciler/test_simulate.py::"
    "test_a_saved_snapshot_simulates_offline_like_the_live_cluster"
)

COVERED: Final[dict[str, str]] = {
    # README.
    "make demo": DEMO,
    "make test": CI,
    # The kubectl plugin (README and runbook).
    "python3 -m venv ~/.local/share/kube-headroom": _PLUGIN_INSTALL,
    "~/.local/share/kube-headroom/bin/pip install .": _PLUGIN_INSTALL,
    "mkdir -p ~/.local/bin": _PLUGIN_INSTALL,
    "ln -sf ~/.local/share/kube-headroom/bin/kubectl-headroom ~/.local/bin/kubectl-headroom": (
        _PLUGIN_INSTALL
    ),
    "kubectl headroom version": _PLUGIN_INSTALL,
    # Preflight.
    "kubectl headroom preflight -n team-a": DEMO,
    "kubectl get resourcequota -A -o json | jq -r '.items[] | "
    'select(.spec.hard["limits.cpu"]) | "\\(.metadata.namespace)/\\(.metadata.name)"\'': DEMO,
    # Install. The end-to-end tier packages and pushes both charts to a local OCI registry
    # and runs these as shown, with that registry's host in place of the published one.
    "helm upgrade --install kube-headroom-crds oci://ghcr.io/karlkfi/charts/kube-headroom-crds": (
        _OCI
    ),
    "helm upgrade --install kube-headroom oci://ghcr.io/karlkfi/charts/kube-headroom "
    "--namespace kube-headroom-system --create-namespace": _OCI,
    "helm template kube-headroom oci://ghcr.io/karlkfi/charts/kube-headroom": _OCI,
    "make install": _INSTALL,
    "make deploy IMG=<registry>/kube-headroom:<tag>": _DEPLOY,
    "kubectl apply -k config/samples": _INSTALL,
    "kubectl get hcfg cluster": _INSTALL,
    # Rollout and day 2.
    "kubectl label ns team-a kube-headroom.dev/mode=managed": DEMO,
    "kubectl get pod -n team-a <pod> "
    "-o jsonpath='{.metadata.annotations.kube-headroom\\.dev/status}' | jq": DEMO,
    """kubectl patch hcfg cluster --type merge -p '{"spec":{"dryRun":false}}'""": DEMO,
    "kubectl describe pod -n team-a <pod> | grep -A2 CPULimitAdjusted": DEMO,
    "kubectl headroom explain -n team-a <pod>": DEMO,
    "kubectl headroom status": DEMO,
    # Simulate and node pools.
    "kubectl headroom simulate --enroll team-a": DEMO,
    "kubectl headroom simulate --save cluster.json.gz": _SIMULATE_OFFLINE,
    "kubectl headroom simulate --snapshot cluster.json.gz --enroll team-a "
    "--set maxMultiplier=5 -o json": _SIMULATE_OFFLINE,
    'kubectl headroom simulate --set \'nodePools=[{"name":"batch","nodeSelector":'
    '{"matchLabels":{"pool":"batch"}},"maxMultiplier":"20"}]\'': DEMO,
    'kubectl patch hcfg cluster --type merge -p \'{"spec":{"nodePools":[{"name":'
    '"batch","nodeSelector":{"matchLabels":{"pool":"batch"}},"maxMultiplier":"20"}]}}\'': DEMO,
    "kubectl patch hcfg cluster --type json -p "
    '\'[{"op":"add","path":"/spec/nodePools/0/dryRun","value":true}]\'': (
        "tests/integration/reconciler/test_pools.py::test_a_pools_dry_run_stops_its_resizes_at_once"
    ),
    # Metrics TLS.
    "helm upgrade --install kube-headroom oci://ghcr.io/karlkfi/charts/kube-headroom "
    "--namespace kube-headroom-system --set metrics.certManagerTLS=true "
    "--set prometheus.enable=true": (
        f"{_E2E}::test_upgrade_serves_metrics_with_the_cert_manager_certificate"
    ),
    "kubectl logs -n kube-headroom-system deploy/kube-headroom-reconciler | grep "
    "'Initializing metrics certificate watcher using provided certificates'": (
        "tests/unit/app/io/test_metrics_server.py::test_secure_metrics_log_the_provided_certificate_line"
    ),
    # Failure modes and rollback.
    """kubectl patch hcfg cluster --type merge -p '{"spec":{"dryRun":true}}'""": DEMO,
    "kubectl label ns team-a kube-headroom.dev/mode-": DEMO,
    # Troubleshooting.
    "kubectl get mutatingwebhookconfiguration kube-headroom-mutating "
    "-o jsonpath='{.webhooks[*].clientConfig.caBundle}'": _TROUBLESHOOTING,
    "kubectl get certificate -n kube-headroom-system kube-headroom-webhook-cert": (
        _TROUBLESHOOTING
    ),
    "kubectl get endpointslices -n kube-headroom-system "
    "-l kubernetes.io/service-name=kube-headroom-webhook": _TROUBLESHOOTING,
    "kubectl get networkpolicy -n kube-headroom-system": _TROUBLESHOOTING,
    # Uninstalling (the dry-run patch and the label removal above run there too).
    "kubectl annotate pods -n team-a --all kube-headroom.dev/status-": _UNINSTALL,
    "helm uninstall kube-headroom --namespace kube-headroom-system": _UNINSTALL,
    "kubectl delete hcfg cluster": _UNINSTALL,
    "helm uninstall kube-headroom-crds": _UNINSTALL,
    "kubectl delete crd headroomconfigs.kube-headroom.dev": _UNINSTALL,
    "kubectl delete namespace kube-headroom-system": _UNINSTALL,
}


def _shown() -> dict[str, list[str]]:
    """Each command the docs show, with the docs that show it."""
    shown: dict[str, list[str]] = {}
    for doc in user_docs():
        for command in shell_commands(doc.read_text()):
            shown.setdefault(command, []).append(doc.relative_to(REPO_ROOT).as_posix())
    return shown


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("```sh\nmake install\n```", ["make install"]),
        ("```bash\n$ make test\n```", ["make test"]),
        (
            "```console\n$ kubectl get hcfg cluster\nNAME  POLICY\ncluster  Proportional\n```",
            ["kubectl get hcfg cluster"],
        ),
        (
            "```sh\nhelm upgrade --install a \\\n  chart/a \\\n  --wait\n```",
            ["helm upgrade --install a chart/a --wait"],
        ),
        (
            "```sh\n# a comment\n\nkubectl apply -k config/samples   # creates it\n```",
            ["kubectl apply -k config/samples"],
        ),
        ("```sh\necho '# kept' \"#kept\"\n```", ["echo '# kept' \"#kept\""]),
        ("  ```sh\n  make deploy IMG=x\n  ```", ["make deploy IMG=x"]),
        ("```yaml\nkind: Pod\n```\n```\nmake test\n```\n`make demo`", []),
    ],
    ids=[
        "sh",
        "bash-prompt",
        "console-skips-output",
        "continuation",
        "comments",
        "hash-in-quotes",
        "indented-fence",
        "not-shell",
    ],
)
def test_commands_are_read_from_shell_blocks(markdown: str, expected: list[str]) -> None:
    assert shell_commands(markdown) == expected


def test_every_command_shown_is_covered() -> None:
    missing = {command: docs for command, docs in _shown().items() if command not in COVERED}
    assert not missing, (
        "commands shown in the docs but not in COVERED (add each with the test that runs "
        f"it, or {DEMO!r}): {missing}"
    )


def test_every_covered_command_is_still_shown() -> None:
    stale = set(COVERED) - set(_shown())
    assert not stale, f"COVERED lists commands no doc shows any more: {sorted(stale)}"


def _test_exists(node_id: str) -> bool:
    path, _, name = node_id.partition("::")
    function = re.sub(r"\[.*\]$", "", name)
    source = REPO_ROOT / Path(path)
    return (
        bool(function)
        and source.is_file()
        and re.search(rf"^(async )?def {re.escape(function)}\(", source.read_text(), re.M)
        is not None
    )


@pytest.mark.parametrize(("command", "where"), COVERED.items(), ids=list(COVERED))
def test_coverage_names_the_demo_ci_or_an_existing_test(command: str, where: str) -> None:
    if where == CI:
        assert command in CI_ENTRY_POINT.read_text().splitlines()
    else:
        assert where == DEMO or _test_exists(where), f"{command!r}: no test {where}"
