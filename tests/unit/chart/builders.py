"""Builders for the chart's values, keyed by the toggles the runbook names."""

from collections.abc import Mapping
from typing import Any

# A bring-your-own webhook serving certificate, for renders with cert-manager off.
BYO_SECRET = "my-webhook-tls"
BYO_CA_BUNDLE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def chart_values(
    *,
    webhook: bool = True,
    certmanager: bool = True,
    prometheus: bool = False,
    network_policy: bool = False,
    cert_manager_tls: bool = False,
    headroom_config: bool = False,
    bring_own_cert: bool | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Values for one combination of toggles, deep-merged with `extra`.

    With cert-manager off and the webhook on, a bring-your-own certificate is filled in
    unless bring_own_cert=False asks for the misconfiguration.
    """
    webhook_values: dict[str, Any] = {"enable": webhook}
    if bring_own_cert is None:
        bring_own_cert = webhook and not certmanager
    if bring_own_cert:
        webhook_values |= {"certSecretName": BYO_SECRET, "caBundle": BYO_CA_BUNDLE}
    values: dict[str, Any] = {
        "webhook": webhook_values,
        "certmanager": {"enable": certmanager},
        "prometheus": {"enable": prometheus},
        "networkPolicy": {"enable": network_policy},
        "metrics": {"certManagerTLS": cert_manager_tls},
        "headroomConfig": {"create": headroom_config},
    }
    return _merge(values, extra or {})
