"""helm lint passes, and values that cannot work fail at render time saying what to set."""

import tempfile
from typing import Any

import pytest
import yaml

from tests.unit.chart.builders import chart_values
from tests.unit.chart.helm import CHART, NAMESPACE, render_error, run_helm

LINTED = {
    "defaults": chart_values(),
    "everything-on": chart_values(
        prometheus=True,
        network_policy=True,
        cert_manager_tls=True,
        headroom_config=True,
        extra={"replicas": 2},
    ),
    "bring-your-own-cert": chart_values(certmanager=False),
    "webhook-off": chart_values(webhook=False, certmanager=False),
}


@pytest.mark.parametrize("strict", [False, True], ids=["lint", "lint-strict"])
@pytest.mark.parametrize("values", LINTED.values(), ids=LINTED.keys())
def test_helm_lint_passes(values: dict[str, Any], strict: bool) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(values, file)
        file.flush()
        args = ["lint", str(CHART), "--namespace", NAMESPACE, "--values", file.name]
        result = run_helm([*args, "--strict"] if strict else args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"replica": 2}, "additional properties 'replica' not allowed"),
        (
            {"webhook": {"enabled": True}},
            "at '/webhook': additional properties 'enabled' not allowed",
        ),
        (
            {"headroomConfig": {"spec": {"dryrun": False}}},
            "at '/headroomConfig/spec': additional properties 'dryrun' not allowed",
        ),
        ({"replicas": "two"}, "at '/replicas': got string, want integer"),
        (
            {"metrics": {"certManagerTLS": "yes"}},
            "at '/metrics/certManagerTLS': got string, want boolean",
        ),
        (
            {"webhook": {"resourceQuotaFailurePolicy": "Deny"}},
            "value must be one of 'Fail', 'Ignore'",
        ),
        ({"image": {"digest": "latest"}}, "at '/image/digest'"),
        ({"replicas": 0}, "at '/replicas'"),
        ({"webhook": {"caBundle": "-----BEGIN CERTIFICATE-----"}}, "at '/webhook/caBundle'"),
    ],
    ids=[
        "unknown-key",
        "unknown-nested-key",
        "unknown-config-field",
        "string-for-integer",
        "string-for-boolean",
        "not-an-enum-value",
        "malformed-digest",
        "zero-replicas",
        "pem-instead-of-base64",
    ],
)
def test_schema_rejects_bad_values_with_a_clear_message(
    extra: dict[str, Any], message: str
) -> None:
    error = render_error(chart_values(extra=extra))
    assert "values don't meet the specifications of the schema" in error
    assert message in error


@pytest.mark.parametrize(
    ("values", "must_say"),
    [
        (
            chart_values(certmanager=False, bring_own_cert=False),
            [
                "set webhook.certSecretName",
                "webhook.caBundle",
                f"kube-headroom-webhook.{NAMESPACE}.svc",
                "or set certmanager.enable=true",
                "or set webhook.enable=false",
            ],
        ),
        (
            chart_values(
                certmanager=False,
                bring_own_cert=False,
                extra={"webhook": {"certSecretName": "tls"}},
            ),
            ["set webhook.certSecretName", "webhook.caBundle"],
        ),
        (
            chart_values(certmanager=False, webhook=False, cert_manager_tls=True),
            ["metrics.certManagerTLS=true", "set certmanager.enable=true"],
        ),
    ],
    ids=[
        "webhook-without-any-cert",
        "cert-secret-without-ca-bundle",
        "metrics-tls-without-cert-manager",
    ],
)
def test_unworkable_combination_fails_saying_what_to_set(
    values: dict[str, Any], must_say: list[str]
) -> None:
    error = render_error(values)
    for words in must_say:
        assert words in error
