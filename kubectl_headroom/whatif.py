"""The HeadroomConfig a simulation runs under: the cluster's, or a file's, with ``--set``.

The result goes through the validating webhook's own validator, so a what-if config
that the cluster would refuse is refused here too, with every field error at once.
"""

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from app.core.config import Settings, parse_config, validate_config
from app.core.labels import API_VERSION, CONFIG_KIND, CONFIG_NAME


class WhatIfError(ValueError):
    """A what-if that cannot run; ``problems`` holds every reason, one per line."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


def what_if_config(
    cluster_config: Mapping[str, Any] | None,
    *,
    config_file: Path | None = None,
    sets: Sequence[str] = (),
    weights: Sequence[str] = (),
) -> dict[str, Any]:
    """The config to simulate: ``config_file`` if given, else the cluster's (the defaults
    when it has none), with every ``--set FIELD=VALUE`` applied to its spec, then every
    ``--weight PRIORITYCLASS=WEIGHT`` put first in each list of weight rules."""
    if config_file is not None:
        config = _read_config_file(config_file)
    elif cluster_config is not None:
        config = copy.deepcopy(dict(cluster_config))
    else:
        config = {"apiVersion": API_VERSION, "kind": CONFIG_KIND, "metadata": {"name": CONFIG_NAME}}
    spec = config.get("spec")
    if not isinstance(spec, dict):
        spec = config["spec"] = {}
    # Every --set is applied in turn, so all their problems are reported at once.
    problems = [problem for item in sets if (problem := _apply_set(spec, item)) is not None]
    # The first given comes first, so it wins as the first match does.
    for item in reversed(weights):
        problem = _apply_weight(spec, item)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise WhatIfError(problems)
    return config


def what_if_settings(config: Mapping[str, Any]) -> tuple[Settings, list[str]]:
    """Settings and warnings of the what-if config; ``WhatIfError`` with every field error
    when the validating webhook would refuse it."""
    result = validate_config(config)
    if result.errors:
        raise WhatIfError([f"invalid HeadroomConfig: {error}" for error in result.errors])
    return parse_config(config), [str(warning) for warning in result.warnings]


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise WhatIfError([f"--config {path}: {err}"]) from err
    if not isinstance(loaded, dict) or loaded.get("kind") != CONFIG_KIND:
        raise WhatIfError([f"--config {path}: not a {CONFIG_KIND} (kind: {CONFIG_KIND} expected)"])
    return loaded


def _apply_weight(spec: dict[str, Any], item: str) -> str | None:
    """Put a rule weighing a PriorityClass first in the top-level weights and in each
    pool's own list (which replaces the top-level one on its nodes); the problem, or None."""
    name, equals, raw = item.partition("=")
    if not equals or not name or not raw.isdigit():
        return f"--weight {item}: expected PRIORITYCLASS=WEIGHT, such as critical=4"
    rule = {"priorityClassName": name, "weight": int(raw)}
    lists = [spec]
    pools = spec.get("nodePools")
    if isinstance(pools, list):
        lists += [pool for pool in pools if isinstance(pool, dict) and "weights" in pool]
    for holder in lists:
        rules = holder.get("weights")
        holder["weights"] = [rule, *(rules if isinstance(rules, list) else [])]
    return None


def _apply_set(spec: dict[str, Any], item: str) -> str | None:
    """Set one spec field from ``FIELD=VALUE``; the problem, or None."""
    key, equals, raw = item.partition("=")
    if not equals or not key:
        return f"--set {item}: expected FIELD=VALUE, such as maxMultiplier=5"
    try:
        # YAML reads VALUE as the API would from a manifest: 5, "5", true, {...}, [...].
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as err:
        return f"--set {item}: the value is not valid YAML: {err}"
    path = key.removeprefix("spec.").split(".")
    target = spec
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[path[-1]] = value
    return None
