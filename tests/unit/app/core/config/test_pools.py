from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from app.core.config import (
    DEFAULT_SETTINGS,
    ConfigError,
    NodePool,
    PoolOverrides,
    Settings,
    parse_config,
    parse_label_selector,
    settings_for_node,
    settings_for_pod,
    validate_config,
)
from app.core.config.pools import pool_settings
from tests.unit.app.builders import headroom_config


def pool(name: str, selector: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": name, "nodeSelector": selector, **fields}


WEB = pool("web", {"matchLabels": {"pool": "web"}}, maxMultiplier="3")
BATCH = pool(
    "batch",
    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]},
    minBurstFloor="0",
    quantum="100m",
    deadband={"growPercent": 30},
    dryRun=True,
    initialMultiplier="4",
)


def settings(*pools: dict[str, Any], **spec: Any) -> Settings:
    return parse_config(headroom_config(spec={"nodePools": list(pools), **spec}))


def test_pools_are_parsed_in_order_with_only_their_overrides() -> None:
    parsed = settings(WEB, BATCH)
    assert parsed.node_pools == (
        NodePool(
            name="web",
            node_selector=parse_label_selector({"matchLabels": {"pool": "web"}}),
            overrides=PoolOverrides(max_multiplier=Fraction(3)),
        ),
        NodePool(
            name="batch",
            node_selector=parse_label_selector(BATCH["nodeSelector"]),
            overrides=PoolOverrides(
                min_burst_floor_m=0,
                quantum_m=100,
                grow_percent=30,
                dry_run=True,
                initial_multiplier=Fraction(4),
            ),
        ),
    )


def test_no_pools_by_default() -> None:
    assert DEFAULT_SETTINGS.node_pools == ()
    assert parse_config(headroom_config(spec={"nodePools": None})).node_pools == ()


def test_a_node_takes_its_pools_overrides_and_keeps_the_rest() -> None:
    top = settings(WEB, BATCH, dryRun=False, maxMultiplier="8", deadband={"shrinkPercent": 7})
    web, name = settings_for_node(top, {"pool": "web"})
    assert name == "web"
    assert web == replace(top, max_multiplier=Fraction(3))
    batch, name = settings_for_node(top, {"pool": "batch"})
    assert name == "batch"
    assert batch == replace(
        top,
        min_burst_floor_m=0,
        quantum_m=100,
        grow_percent=30,
        dry_run=True,
        webhook_initial_multiplier=Fraction(4),
    )
    assert batch.shrink_percent == 7


def test_a_node_in_no_pool_uses_the_top_level_settings() -> None:
    top = settings(WEB, BATCH)
    assert settings_for_node(top, {"pool": "gpu"}) == (top, None)
    assert settings_for_node(top, {}) == (top, None)


def test_the_first_matching_pool_wins() -> None:
    catch_all = pool("rest", {}, maxMultiplier="2")
    top = settings(WEB, catch_all)
    assert settings_for_node(top, {"pool": "web"})[1] == "web"
    assert settings_for_node(top, {"pool": "other"})[1] == "rest"
    reversed_order = settings(catch_all, WEB)
    assert settings_for_node(reversed_order, {"pool": "web"})[1] == "rest"


@pytest.mark.parametrize(
    ("top_dry_run", "pool_dry_run", "effective"),
    [
        pytest.param(False, None, False, id="enforcing-inherited"),
        pytest.param(False, True, True, id="pool-stop-button"),
        pytest.param(False, False, False, id="enforcing-explicit"),
        pytest.param(True, False, True, id="top-level-stop-button-wins"),
        pytest.param(True, None, True, id="dry-run-inherited"),
    ],
)
def test_dry_run_is_the_top_level_or_the_pools(
    top_dry_run: bool, pool_dry_run: bool | None, effective: bool
) -> None:
    fields = {} if pool_dry_run is None else {"dryRun": pool_dry_run}
    top = settings(pool("web", {"matchLabels": {"pool": "web"}}, **fields), dryRun=top_dry_run)
    assert settings_for_node(top, {"pool": "web"})[0].dry_run is effective


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]
            }
        }
    }


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


CATCH_ALL = pool("rest", {}, maxMultiplier="2")


@pytest.mark.parametrize(
    ("spec", "pools", "expected"),
    [
        pytest.param({"nodeSelector": {"pool": "web"}}, (WEB, BATCH), "web", id="node-selector"),
        pytest.param(
            {"nodeSelector": {"pool": "web", "zone": "a"}}, (WEB, BATCH), "web", id="more-labels"
        ),
        pytest.param({}, (WEB, BATCH), None, id="unconstrained"),
        pytest.param({}, (CATCH_ALL,), "rest", id="unconstrained-every-node-in-one-pool"),
        pytest.param({"nodeSelector": {"zone": "a"}}, (WEB, BATCH), None, id="pool-open"),
        pytest.param(
            {"nodeSelector": {"pool": "gpu"}}, (WEB, BATCH), None, id="no-pool-is-top-level"
        ),
        pytest.param(
            {"affinity": affinity([expression("pool", "In", "batch")])},
            (WEB, BATCH),
            "batch",
            id="affinity",
        ),
        pytest.param(
            {
                "affinity": affinity(
                    [expression("pool", "In", "batch")], [expression("pool", "In", "web")]
                )
            },
            (WEB, BATCH),
            None,
            id="affinity-terms-in-different-pools",
        ),
        pytest.param(
            {
                "affinity": affinity(
                    [expression("pool", "In", "web"), expression("zone", "In", "a")],
                    [expression("pool", "In", "web"), expression("zone", "In", "b")],
                )
            },
            (WEB, BATCH),
            "web",
            id="affinity-terms-in-one-pool",
        ),
        pytest.param(
            {
                "nodeSelector": {"pool": "web"},
                "affinity": affinity([expression("zone", "In", "a")]),
            },
            (WEB, BATCH),
            "web",
            id="selector-and-affinity",
        ),
        pytest.param(
            {"affinity": affinity([expression("pool", "NotIn", "web")])},
            (WEB, CATCH_ALL),
            "rest",
            id="not-in-skips-earlier-pool",
        ),
        pytest.param(
            {"affinity": affinity([expression("pool", "Gt", "3")])},
            (WEB, BATCH),
            None,
            id="numeric-is-open",
        ),
        pytest.param(
            {"affinity": affinity([expression("pool", "Gt", "3")])},
            (pool("labelled", {"matchExpressions": [expression("pool", "Exists")]}),),
            "labelled",
            id="numeric-implies-exists",
        ),
    ],
)
def test_a_new_pods_pool_is_known_only_when_its_node_selection_settles_it(
    spec: dict[str, Any], pools: tuple[dict[str, Any], ...], expected: str | None
) -> None:
    top = settings(*pools)
    effective, name = settings_for_pod(top, spec)
    assert name == expected
    if expected is None:
        assert effective is top
    else:
        index = [p.name for p in top.node_pools].index(expected)
        assert effective == pool_settings(top, index)


def test_a_new_pod_gets_its_pools_birth_settings() -> None:
    top = settings(WEB, BATCH, dryRun=False)
    effective, name = settings_for_pod(top, {"nodeSelector": {"pool": "batch"}})
    assert name == "batch"
    assert effective.webhook_initial_multiplier == 4
    assert effective.dry_run is True


def test_without_pools_every_pod_uses_the_top_level() -> None:
    top = settings()
    assert settings_for_pod(top, {"nodeSelector": {"pool": "web"}}) == (top, None)


@pytest.mark.parametrize(
    ("pools", "paths"),
    [
        pytest.param("web", ["spec.nodePools"], id="not-a-list"),
        pytest.param(["web"], ["spec.nodePools[0]"], id="item-not-object"),
        pytest.param([{"nodeSelector": {}}], ["spec.nodePools[0].name"], id="no-name"),
        pytest.param([pool("Web_1", {})], ["spec.nodePools[0].name"], id="name-not-dns-label"),
        pytest.param([pool("x" * 64, {})], ["spec.nodePools[0].name"], id="name-too-long"),
        pytest.param([{"name": "web"}], ["spec.nodePools[0].nodeSelector"], id="no-selector"),
        pytest.param(
            [pool("web", {"matchLabels": {"pool": 1}})],
            ["spec.nodePools[0].nodeSelector.matchLabels[pool]"],
            id="bad-selector",
        ),
        pytest.param(
            [pool("web", {}, maxMultiplier="101", priority=1)],
            ["spec.nodePools[0].priority", "spec.nodePools[0].maxMultiplier"],
            id="unknown-field-and-bad-multiplier",
        ),
        pytest.param(
            [
                pool(
                    "web",
                    {},
                    minBurstFloor="-1",
                    quantum="0",
                    deadband={"growPercent": 101, "shrinkPercent": "5", "x": 1},
                    dryRun="yes",
                    initialMultiplier="0.5",
                )
            ],
            [
                "spec.nodePools[0].deadband.x",
                "spec.nodePools[0].minBurstFloor",
                "spec.nodePools[0].quantum",
                "spec.nodePools[0].deadband.growPercent",
                "spec.nodePools[0].deadband.shrinkPercent",
                "spec.nodePools[0].dryRun",
                "spec.nodePools[0].initialMultiplier",
            ],
            id="every-override-invalid",
        ),
        pytest.param(
            [WEB, BATCH, pool("web", {"matchLabels": {"pool": "other"}}, quantum="20m")],
            ["spec.nodePools[2].name"],
            id="duplicate-name",
        ),
        pytest.param(
            [WEB] * 65,
            ["spec.nodePools", *(f"spec.nodePools[{i}].name" for i in range(1, 65))],
            id="too-many",
        ),
    ],
)
def test_every_pool_error_carries_its_field_path(pools: object, paths: list[str]) -> None:
    config = headroom_config(spec={"nodePools": pools})
    result = validate_config(config)
    assert [error.path for error in result.errors] == paths
    with pytest.raises(ConfigError):
        parse_config(config)


def test_pool_errors_come_with_the_other_errors() -> None:
    result = validate_config(
        headroom_config(spec={"quantum": "0", "nodePools": [pool("web", {}, quantum="0")]})
    )
    assert [error.path for error in result.errors] == ["spec.quantum", "spec.nodePools[0].quantum"]


def test_valid_pools_do_not_warn() -> None:
    result = validate_config(headroom_config(spec={"nodePools": [WEB, BATCH]}))
    assert result.allowed
    assert result.warnings == ()


@pytest.mark.parametrize(
    ("spec", "paths"),
    [
        pytest.param({"nodePools": [pool("web", {})]}, ["spec.nodePools[0]"], id="no-overrides"),
        pytest.param(
            {"nodePools": [pool("web", {}, maxMultiplier="0")]},
            ["spec.nodePools[0].maxMultiplier"],
            id="uncapped",
        ),
        pytest.param(
            {"nodePools": [pool("web", {}, maxMultiplier="0.5")]},
            ["spec.nodePools[0].maxMultiplier", "spec.nodePools[0].initialMultiplier"],
            id="below-one",
        ),
        pytest.param(
            {"nodePools": [pool("web", {}, quantum="2")]},
            ["spec.nodePools[0].quantum"],
            id="huge-quantum",
        ),
        pytest.param(
            {"nodePools": [pool("web", {}, deadband={"growPercent": 0})]},
            ["spec.nodePools[0].deadband.growPercent", "spec.nodePools[0].deadband.shrinkPercent"],
            id="no-grow-band",
        ),
        pytest.param(
            {
                "deadband": {"growPercent": 20},
                "nodePools": [pool("web", {}, deadband={"shrinkPercent": 30})],
            },
            ["spec.nodePools[0].deadband.shrinkPercent"],
            id="shrink-wider-than-inherited-grow",
        ),
        pytest.param(
            {"nodePools": [pool("web", {}, dryRun=False)]},
            ["spec.nodePools[0].dryRun"],
            id="enforcing-pool-under-dry-run",
        ),
        pytest.param(
            {"maxMultiplier": "3", "nodePools": [pool("web", {}, initialMultiplier="4")]},
            ["spec.nodePools[0].initialMultiplier"],
            id="initial-above-inherited-max",
        ),
        pytest.param(
            {
                "nodePools": [
                    WEB,
                    pool("web-a", {"matchLabels": {"pool": "web", "zone": "a"}}, quantum="20m"),
                ]
            },
            ["spec.nodePools[1].nodeSelector"],
            id="shadowed",
        ),
        pytest.param(
            {"nodePools": [WEB, pool("zone-a", {"matchLabels": {"zone": "a"}}, quantum="20m")]},
            ["spec.nodePools[1].nodeSelector"],
            id="overlapping",
        ),
        pytest.param(
            {
                "excludedNodeSelector": {"matchLabels": {"gpu": "true"}},
                "nodePools": [pool("gpu", {"matchLabels": {"gpu": "true"}}, quantum="20m")],
            },
            ["spec.nodePools[0].nodeSelector"],
            id="excluded",
        ),
    ],
)
def test_risky_pools_warn(spec: dict[str, Any], paths: list[str]) -> None:
    result = validate_config(headroom_config(spec=spec))
    assert result.allowed, result.errors
    assert [warning.path for warning in result.warnings] == paths


def test_overlap_warnings_name_the_pool_that_wins() -> None:
    zone = pool("zone-a", {"matchLabels": {"zone": "a"}}, quantum="20m")
    result = validate_config(headroom_config(spec={"nodePools": [WEB, zone]}))
    (warning,) = result.warnings
    assert str(warning) == (
        "spec.nodePools[1].nodeSelector: overlaps spec.nodePools[0] ('web'), which comes "
        "first: nodes matching both use 'web'"
    )
