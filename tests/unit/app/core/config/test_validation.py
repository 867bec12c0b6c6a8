from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from app.core.config import (
    DEFAULT_SETTINGS,
    ConfigError,
    OwnerExclusion,
    WeightRule,
    parse_config,
    parse_label_selector,
    settings_for_node,
    validate_config,
)
from tests.unit.app.builders import FULL_SPEC, headroom_config


def test_no_config_gives_the_defaults() -> None:
    assert parse_config(None) is DEFAULT_SETTINGS


def test_empty_spec_gives_the_defaults_and_the_generation() -> None:
    assert parse_config(headroom_config(generation=7)) == replace(DEFAULT_SETTINGS, generation=7)


def test_default_values() -> None:
    settings = DEFAULT_SETTINGS
    assert settings.policy == "Proportional"
    assert settings.dry_run is True
    assert settings.min_burst_floor_m == 1000
    assert settings.max_multiplier == 10
    assert settings.quantum_m == 10
    assert (settings.grow_percent, settings.shrink_percent) == (10, 5)
    assert (settings.debounce_seconds, settings.backoff_seconds) == (2.0, 300.0)
    assert (settings.per_node_patches_per_second, settings.client_qps) == (10, 50)
    assert settings.client_burst == 100
    assert settings.webhook_enabled is True
    assert settings.webhook_initial_multiplier == 2
    assert settings.namespace_selector.matches({"kube-headroom.dev/mode": "managed"})
    assert not settings.namespace_selector.matches({"kube-headroom.dev/mode": "Managed"})
    assert settings.excluded_namespaces == frozenset({"kube-system"})
    assert settings.excluded_owners == ()
    assert settings.excluded_node_selector is None


# What FULL_SPEC parses to, setting by setting; the rest keep their defaults.
FULL_SPEC_SETTINGS: dict[str, Any] = {
    "dry_run": False,
    "min_burst_floor_m": 500,
    "max_multiplier": Fraction(9, 2),
    "quantum_m": 50,
    "grow_percent": 20,
    "shrink_percent": 10,
    "debounce_seconds": 90.0,
    "backoff_seconds": 600.0,
    "per_node_patches_per_second": 5,
    "client_qps": 20,
    "client_burst": 40,
    "webhook_enabled": False,
    "webhook_initial_multiplier": Fraction(3),
    "namespace_selector": parse_label_selector({"matchLabels": {"team": "a"}}),
    "excluded_namespaces": frozenset({"kube-system", "monitoring"}),
    "excluded_owners": (
        OwnerExclusion(kind="DaemonSet"),
        OwnerExclusion(kind="StatefulSet", api_group="apps", name="db"),
    ),
    "excluded_node_selector": parse_label_selector(
        {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}
    ),
    "weights": (
        WeightRule(path="spec.weights[0]", weight=4, priority_class="critical"),
        WeightRule(
            path="spec.weights[1]",
            weight=0,
            namespace_selector=parse_label_selector({"matchLabels": {"team": "a"}}),
            pod_selector=parse_label_selector({}),
        ),
    ),
}


def test_every_field_is_parsed() -> None:
    settings = parse_config(headroom_config(generation=3, spec=FULL_SPEC))
    assert settings == replace(DEFAULT_SETTINGS, **FULL_SPEC_SETTINGS, generation=3)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"deadband": None, "rateLimits": None, "webhook": None}, id="null-parents"),
        pytest.param({"deadband": {}, "rateLimits": {}, "webhook": {}}, id="empty-parents"),
        pytest.param(
            dict.fromkeys(FULL_SPEC),
            id="every-field-null",
        ),
    ],
)
def test_defaults_apply_at_every_level(spec: dict[str, Any]) -> None:
    assert parse_config(headroom_config(spec=spec)) == replace(DEFAULT_SETTINGS, generation=1)


def test_a_partial_parent_keeps_the_defaults_of_its_other_fields() -> None:
    settings = parse_config(headroom_config(spec={"deadband": {"growPercent": 25}}))
    assert (settings.grow_percent, settings.shrink_percent) == (25, 5)


@pytest.mark.parametrize(
    ("spec", "field", "value"),
    [
        pytest.param({"maxMultiplier": "0"}, "max_multiplier", Fraction(0), id="multiplier-off"),
        pytest.param(
            {"maxMultiplier": 100}, "max_multiplier", Fraction(100), id="integer-quantity"
        ),
        pytest.param({"minBurstFloor": "0"}, "min_burst_floor_m", 0, id="floor-off"),
        pytest.param({"minBurstFloor": "0.0001"}, "min_burst_floor_m", 1, id="floor-rounds-up"),
        pytest.param({"quantum": "1m"}, "quantum_m", 1, id="fine-quantum"),
        pytest.param({"debouncePeriod": "0s"}, "debounce_seconds", 0.0, id="no-debounce"),
        pytest.param(
            {"excludedNamespaces": []}, "excluded_namespaces", frozenset(), id="none-excluded"
        ),
        pytest.param(
            {"webhook": {"initialMultiplier": "1"}},
            "webhook_initial_multiplier",
            Fraction(1),
            id="initial-multiplier-one",
        ),
        pytest.param(
            {"excludedOwners": [{"kind": "Job", "apiGroup": ""}]},
            "excluded_owners",
            (OwnerExclusion(kind="Job", api_group=""),),
            id="core-group-owner",
        ),
    ],
)
def test_edge_values_are_legal(spec: dict[str, Any], field: str, value: object) -> None:
    assert getattr(parse_config(headroom_config(spec=spec)), field) == value


def _spec_error(spec: dict[str, Any], *paths: str, id: str) -> Any:
    """A case of a config whose spec alone is wrong, at these paths."""
    return pytest.param(headroom_config(spec=spec), list(paths), id=id)


@pytest.mark.parametrize(
    ("config", "paths"),
    [
        pytest.param(headroom_config(name="default"), ["metadata.name"], id="not-the-singleton"),
        pytest.param({"spec": {}}, ["metadata.name"], id="no-metadata"),
        pytest.param({"metadata": "cluster"}, ["metadata", "metadata.name"], id="bad-metadata"),
        pytest.param({"metadata": {"name": "cluster"}, "spec": []}, ["spec"], id="spec-not-object"),
        _spec_error({"polcy": "x"}, "spec.polcy", id="unknown-field"),
        _spec_error({"policy": "Greedy"}, "spec.policy", id="bad-policy"),
        _spec_error({"dryRun": "yes"}, "spec.dryRun", id="dryrun-string"),
        _spec_error({"minBurstFloor": "-1"}, "spec.minBurstFloor", id="negative-floor"),
        _spec_error({"minBurstFloor": "1 core"}, "spec.minBurstFloor", id="bad-quantity"),
        _spec_error({"minBurstFloor": 0.5}, "spec.minBurstFloor", id="float-quantity"),
        _spec_error({"minBurstFloor": True}, "spec.minBurstFloor", id="bool-quantity"),
        _spec_error({"maxMultiplier": "101"}, "spec.maxMultiplier", id="multiplier-high"),
        _spec_error({"maxMultiplier": "-1"}, "spec.maxMultiplier", id="multiplier-negative"),
        _spec_error({"quantum": "0"}, "spec.quantum", id="zero-quantum"),
        _spec_error({"quantum": "-10m"}, "spec.quantum", id="negative-quantum"),
        _spec_error(
            {"deadband": {"growPercent": 101}}, "spec.deadband.growPercent", id="grow-above-100"
        ),
        _spec_error(
            {"deadband": {"shrinkPercent": -1}}, "spec.deadband.shrinkPercent", id="shrink-negative"
        ),
        _spec_error(
            {"deadband": {"growPercent": "10"}}, "spec.deadband.growPercent", id="grow-string"
        ),
        _spec_error(
            {"deadband": {"growPercent": True}}, "spec.deadband.growPercent", id="grow-bool"
        ),
        _spec_error({"deadband": {"grow": 10}}, "spec.deadband.grow", id="unknown-deadband-field"),
        _spec_error({"deadband": 10}, "spec.deadband", id="deadband-scalar"),
        _spec_error({"debouncePeriod": "2"}, "spec.debouncePeriod", id="no-unit"),
        _spec_error({"debouncePeriod": 2}, "spec.debouncePeriod", id="duration-int"),
        _spec_error({"backoffPeriod": "-5m"}, "spec.backoffPeriod", id="negative-backoff"),
        _spec_error({"rateLimits": {"clientQPS": 0}}, "spec.rateLimits.clientQPS", id="zero-qps"),
        _spec_error(
            {"rateLimits": {"perNodePatchesPerSecond": 0, "clientBurst": 0}},
            "spec.rateLimits.perNodePatchesPerSecond",
            "spec.rateLimits.clientBurst",
            id="zero-rates",
        ),
        _spec_error({"webhook": {"enabled": 1}}, "spec.webhook.enabled", id="enabled-int"),
        _spec_error(
            {"webhook": {"initialMultiplier": "0.5"}},
            "spec.webhook.initialMultiplier",
            id="initial-below-one",
        ),
        _spec_error(
            {"webhook": {"initialMultiplier": "101"}},
            "spec.webhook.initialMultiplier",
            id="initial-above-100",
        ),
        _spec_error({"webhook": {"mode": "x"}}, "spec.webhook.mode", id="unknown-webhook-field"),
        _spec_error(
            {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}},
            "spec.namespaceSelector.matchExpressions[0].operator",
            id="bad-namespace-selector",
        ),
        _spec_error(
            {"excludedNodeSelector": {"matchLabels": {"a": "b c"}}},
            "spec.excludedNodeSelector.matchLabels[a]",
            id="bad-node-selector",
        ),
        _spec_error(
            {"excludedNamespaces": "kube-system"},
            "spec.excludedNamespaces",
            id="namespaces-not-list",
        ),
        _spec_error(
            {"excludedNamespaces": ["kube-system", "", 3]},
            "spec.excludedNamespaces[1]",
            "spec.excludedNamespaces[2]",
            id="bad-namespace-names",
        ),
        _spec_error(
            {"excludedOwners": {"kind": "Job"}}, "spec.excludedOwners", id="owners-not-list"
        ),
        _spec_error({"weights": {"weight": 2}}, "spec.weights", id="weights-not-list"),
        _spec_error(
            {
                "weights": [
                    "critical",
                    {"priorityClassName": "Critical_1", "weight": 101, "owner": "me"},
                    {"podSelector": {"matchLabels": {"a": "b c"}}, "weight": "4"},
                    {"namespaceSelector": [], "weight": -1},
                ]
            },
            "spec.weights[0]",
            "spec.weights[1].owner",
            "spec.weights[1].priorityClassName",
            "spec.weights[1].weight",
            "spec.weights[2].podSelector.matchLabels[a]",
            "spec.weights[2].weight",
            "spec.weights[3].namespaceSelector",
            "spec.weights[3].weight",
            id="bad-weight-rules",
        ),
        _spec_error({"weights": [{"weight": 1}] * 65}, "spec.weights", id="too-many-weight-rules"),
        _spec_error(
            {"nodePools": [{"name": "web", "nodeSelector": {}, "weights": [{"weight": 200}]}]},
            "spec.nodePools[0].weights[0].weight",
            id="bad-pool-weight",
        ),
        _spec_error({"excludedOwners": ["Job"]}, "spec.excludedOwners[0]", id="owner-not-object"),
        _spec_error(
            {"excludedOwners": [{"name": "x"}]},
            "spec.excludedOwners[0].kind",
            id="owner-without-kind",
        ),
        _spec_error(
            {"excludedOwners": [{"kind": "Job", "apiGroup": 1, "name": "", "uid": "u"}]},
            "spec.excludedOwners[0].uid",
            "spec.excludedOwners[0].apiGroup",
            "spec.excludedOwners[0].name",
            id="owner-bad-fields",
        ),
    ],
)
def test_every_error_carries_its_field_path(config: dict[str, Any], paths: list[str]) -> None:
    result = validate_config(config)
    assert not result.allowed
    assert [error.path for error in result.errors] == paths
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    assert raised.value.errors == result.errors


def test_all_errors_are_reported_at_once() -> None:
    config = headroom_config(
        name="other",
        spec={
            "policy": "Greedy",
            "quantum": "0",
            "deadband": {"growPercent": 200, "shrinkPercent": -5},
            "rateLimits": None,
            "webhook": {"initialMultiplier": "1e3m"},
            "extra": True,
        },
    )
    result = validate_config(config)
    assert [error.path for error in result.errors] == [
        "metadata.name",
        "spec.extra",
        "spec.policy",
        "spec.quantum",
        "spec.deadband.growPercent",
        "spec.deadband.shrinkPercent",
        "spec.webhook.initialMultiplier",
    ]
    assert "spec.deadband.growPercent: must be between 0 and 100" in str(ConfigError(result.errors))


def test_a_valid_config_is_allowed_without_warnings() -> None:
    result = validate_config(headroom_config())
    assert result.allowed
    assert result.errors == ()
    assert result.warnings == ()


@pytest.mark.parametrize(
    ("spec", "paths"),
    [
        pytest.param({"dryRun": False}, ["spec.dryRun"], id="enforcing"),
        pytest.param({"maxMultiplier": "0"}, ["spec.maxMultiplier"], id="uncapped"),
        pytest.param(
            {"maxMultiplier": "0.5"},
            ["spec.maxMultiplier", "spec.webhook.initialMultiplier"],
            id="multiplier-below-one",
        ),
        pytest.param({"quantum": "1"}, ["spec.quantum"], id="huge-quantum"),
        pytest.param(
            {"deadband": {"growPercent": 0, "shrinkPercent": 0}},
            ["spec.deadband.growPercent"],
            id="no-grow-band",
        ),
        pytest.param(
            {"deadband": {"growPercent": 5, "shrinkPercent": 10}},
            ["spec.deadband.shrinkPercent"],
            id="shrink-wider-than-grow",
        ),
        pytest.param({"debouncePeriod": "0"}, ["spec.debouncePeriod"], id="no-debounce"),
        pytest.param({"backoffPeriod": "0s"}, ["spec.backoffPeriod"], id="no-backoff"),
        pytest.param({"namespaceSelector": {}}, ["spec.namespaceSelector"], id="every-namespace"),
        pytest.param(
            {"excludedNamespaces": ["monitoring"]},
            ["spec.excludedNamespaces"],
            id="kube-system-not-excluded",
        ),
        pytest.param(
            {"maxMultiplier": "2", "webhook": {"initialMultiplier": "3"}},
            ["spec.webhook.initialMultiplier"],
            id="initial-above-max",
        ),
        pytest.param(
            {"maxMultiplier": "0", "webhook": {"initialMultiplier": "50"}},
            ["spec.maxMultiplier"],
            id="initial-unbounded-when-uncapped",
        ),
        pytest.param(
            {"excludedOwners": [{"kind": "Job", "apiGroup": "batch"}, {"kind": "Job"}]},
            [],
            id="owner-group-named-or-omitted",
        ),
        pytest.param(
            {"excludedOwners": [{"kind": "Job"}, {"kind": "Job", "apiGroup": ""}]},
            ["spec.excludedOwners[1].apiGroup"],
            id="owner-core-group",
        ),
        pytest.param(
            {
                "weights": [
                    {"priorityClassName": "critical", "weight": 4},
                    {"namespaceSelector": {"matchLabels": {"tier": "gold"}}, "weight": 2},
                    {"podSelector": {"matchLabels": {"batch": "true"}}, "weight": 0},
                    {"weight": 1},
                ]
            },
            [],
            id="weights-each-reachable",
        ),
        pytest.param(
            {
                "weights": [
                    {"namespaceSelector": {"matchLabels": {"tier": "gold"}}, "weight": 2},
                    {
                        "priorityClassName": "critical",
                        "namespaceSelector": {"matchLabels": {"tier": "gold", "x": "y"}},
                        "weight": 4,
                    },
                    {"weight": 3},
                    {"priorityClassName": "critical", "weight": 5},
                ]
            },
            ["spec.weights[1]", "spec.weights[3]"],
            id="weights-shadowed",
        ),
        pytest.param(
            {
                "weights": [
                    {
                        "namespaceSelector": {
                            "matchExpressions": [
                                {"key": "kube-headroom.dev/mode", "operator": "DoesNotExist"}
                            ]
                        },
                        "weight": 2,
                    },
                    {
                        "podSelector": {
                            "matchLabels": {"a": "x"},
                            "matchExpressions": [
                                {"key": "a", "operator": "NotIn", "values": ["x"]}
                            ],
                        },
                        "weight": 2,
                    },
                ]
            },
            ["spec.weights[0].namespaceSelector", "spec.weights[1].podSelector"],
            id="weights-that-match-nothing",
        ),
        pytest.param(
            {"weights": [{"podSelector": {"matchLabels": {"tier": "gold"}}, "weight": 4}]},
            ["spec.weights[0].podSelector"],
            id="weight-a-tenant-can-claim",
        ),
        pytest.param(
            {
                "nodePools": [
                    {
                        "name": "web",
                        "nodeSelector": {},
                        "weights": [{"weight": 2}, {"priorityClassName": "critical"}],
                    }
                ]
            },
            ["spec.nodePools[0].weights[1]"],
            id="pool-weights-shadowed",
        ),
    ],
)
def test_risky_but_legal_settings_warn(spec: dict[str, Any], paths: list[str]) -> None:
    result = validate_config(headroom_config(spec=spec))
    assert result.allowed
    assert [warning.path for warning in result.warnings] == paths
    assert all(str(warning).startswith(warning.path + ": ") for warning in result.warnings)


def test_a_pools_weights_replace_the_top_level_ones_on_its_nodes() -> None:
    settings = parse_config(
        headroom_config(
            spec={
                "weights": [{"priorityClassName": "critical", "weight": 4}],
                "nodePools": [
                    {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}},
                    {
                        "name": "web",
                        "nodeSelector": {"matchLabels": {"pool": "web"}},
                        "weights": [{"priorityClassName": "critical", "weight": 8}],
                    },
                ],
            }
        )
    )
    top = settings.weights
    assert [(rule.path, rule.weight) for rule in top] == [("spec.weights[0]", 4)]
    batch, _ = settings_for_node(settings, {"pool": "batch"})
    web, _ = settings_for_node(settings, {"pool": "web"})
    assert batch.weights == top
    assert [(rule.path, rule.weight) for rule in web.weights] == [
        ("spec.nodePools[1].weights[0]", 8)
    ]


def test_generation_that_is_not_an_integer_is_ignored() -> None:
    config = headroom_config(generation=None)
    config["metadata"]["generation"] = "3"
    assert parse_config(config).generation is None


def test_an_empty_owner_group_warning_says_what_it_matches() -> None:
    spec = {"excludedOwners": [{"kind": "Job", "apiGroup": ""}]}
    [warning] = validate_config(headroom_config(spec=spec)).warnings
    assert str(warning) == (
        'spec.excludedOwners[0].apiGroup: "" matches only Job owners in the core group '
        '(apiVersion "v1"); omit apiGroup to match Job owners in any group'
    )


def test_explanations_have_a_write_budget_apart_from_resizes() -> None:
    assert (DEFAULT_SETTINGS.explanation_qps, DEFAULT_SETTINGS.explanation_burst) == (50, 100)
    rate_limits = {"clientQPS": 20, "clientBurst": 40, "explanationQPS": 5, "explanationBurst": 8}
    settings = parse_config(headroom_config(spec={"rateLimits": rate_limits}))
    assert (settings.client_qps, settings.client_burst) == (20, 40)
    assert (settings.explanation_qps, settings.explanation_burst) == (5, 8)


def test_explanation_rates_are_at_least_one() -> None:
    rate_limits = {"explanationQPS": 0, "explanationBurst": "100"}
    errors = validate_config(headroom_config(spec={"rateLimits": rate_limits})).errors
    assert [str(error) for error in errors] == [
        "spec.rateLimits.explanationQPS: must be at least 1",
        "spec.rateLimits.explanationBurst: must be an integer",
    ]


def test_explanation_rates_are_not_pool_overrides() -> None:
    pool = {"name": "web", "nodeSelector": {}, "explanationQPS": 5}
    errors = validate_config(headroom_config(spec={"nodePools": [pool]})).errors
    assert [str(error) for error in errors] == ["spec.nodePools[0].explanationQPS: unknown field"]
