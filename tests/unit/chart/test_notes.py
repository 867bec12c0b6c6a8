"""NOTES.txt tells the operator the next step of the staged rollout."""

import pytest

from tests.unit.chart.builders import chart_values
from tests.unit.chart.helm import render_notes

ENROL = "kubectl label ns <namespace> kube-headroom.dev/mode=managed"
ENFORCE = """kubectl patch hcfg cluster --type merge -p '{"spec":{"dryRun":false}}'"""
CREATE_FROM_SAMPLE = "kubectl apply -k config/samples"
CERT_LOG_LINE = "Initializing metrics certificate watcher using provided certificates"


@pytest.mark.parametrize(
    ("values", "present", "absent"),
    [
        (chart_values(), [CREATE_FROM_SAMPLE, "headroomConfig.create=true", ENROL, ENFORCE], []),
        (
            chart_values(headroom_config=True),
            ["created in dry-run", ENROL, ENFORCE],
            [CREATE_FROM_SAMPLE],
        ),
        (
            chart_values(
                headroom_config=True, extra={"headroomConfig": {"spec": {"dryRun": False}}}
            ),
            ["dryRun: false", ENROL],
            [CREATE_FROM_SAMPLE, ENFORCE],
        ),
    ],
    ids=["no-config-yet", "config-in-dry-run", "config-enforcing"],
)
def test_notes_name_the_next_rollout_step(
    values: dict[str, object], present: list[str], absent: list[str]
) -> None:
    notes = render_notes(values)
    for text in present:
        assert text in notes
    for text in absent:
        assert text not in notes


@pytest.mark.parametrize(
    ("tls", "expected"),
    [(True, CERT_LOG_LINE), (False, "--set metrics.certManagerTLS=true")],
    ids=["cert-manager-tls", "self-signed"],
)
def test_notes_explain_the_metrics_certificate(tls: bool, expected: str) -> None:
    assert expected in render_notes(chart_values(cert_manager_tls=tls))


@pytest.mark.parametrize(
    ("webhook", "expected"),
    [
        (True, "set webhook.namespaceSelector to the same selector"),
        (False, "WARNING: webhook.enable=false"),
    ],
    ids=["webhook-on", "webhook-off"],
)
def test_notes_warn_about_the_webhook_selector_or_its_absence(webhook: bool, expected: str) -> None:
    assert expected in render_notes(chart_values(webhook=webhook))
