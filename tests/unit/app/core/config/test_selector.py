from typing import Any

import pytest

from app.core.config import LabelSelector, SelectorError, parse_label_selector

ENV_IN = {"key": "env", "operator": "In", "values": ["prod", "staging"]}


def _env(operator: str, values: list[str] | None = None) -> dict[str, Any]:
    """A selector of one expression on the env label; no values leaves the field out."""
    expression: dict[str, Any] = {"key": "env", "operator": operator}
    if values is not None:
        expression["values"] = values
    return {"matchExpressions": [expression]}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        pytest.param({}, {}, True, id="empty-matches-everything"),
        pytest.param({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True, id="labels-match"),
        pytest.param({"matchLabels": {"a": "1"}}, {"a": "2"}, False, id="labels-differ"),
        pytest.param({"matchLabels": {"a": "1"}}, {}, False, id="labels-absent"),
        pytest.param({"matchExpressions": [ENV_IN]}, {"env": "prod"}, True, id="in-match"),
        pytest.param({"matchExpressions": [ENV_IN]}, {"env": "dev"}, False, id="in-other"),
        pytest.param({"matchExpressions": [ENV_IN]}, {}, False, id="in-absent"),
        pytest.param(_env("NotIn", ["prod"]), {"env": "dev"}, True, id="notin-other"),
        pytest.param(_env("NotIn", ["prod"]), {"env": "prod"}, False, id="notin-listed"),
        pytest.param(_env("NotIn", ["prod"]), {}, True, id="notin-absent-matches"),
        pytest.param(_env("Exists"), {"env": ""}, True, id="exists-empty-value"),
        pytest.param(_env("Exists", []), {}, False, id="exists-absent"),
        pytest.param(_env("DoesNotExist"), {}, True, id="doesnotexist-absent-matches"),
        pytest.param(_env("DoesNotExist"), {"env": "prod"}, False, id="doesnotexist-present"),
        pytest.param(
            {"matchLabels": {"team": "a"}, "matchExpressions": [ENV_IN]},
            {"team": "a", "env": "dev"},
            False,
            id="labels-and-expressions-both-required",
        ),
        pytest.param(
            {"matchLabels": {"team": "a"}, "matchExpressions": [ENV_IN]},
            {"team": "a", "env": "prod"},
            True,
            id="labels-and-expressions-both-hold",
        ),
        pytest.param(
            {"matchLabels": {"example.com/team": "a"}, "matchExpressions": None},
            {"example.com/team": "a"},
            True,
            id="prefixed-key-null-expressions",
        ),
    ],
)
def test_matches(selector: dict[str, Any], labels: dict[str, str], matches: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is matches


@pytest.mark.parametrize(
    ("selector", "paths"),
    [
        pytest.param(None, ["sel"], id="null"),
        pytest.param([], ["sel"], id="not-an-object"),
        pytest.param({"matchLabel": {}}, ["sel.matchLabel"], id="unknown-field"),
        pytest.param({"matchLabels": ["a"]}, ["sel.matchLabels"], id="labels-not-a-map"),
        pytest.param({"matchLabels": {"a b": "1"}}, ["sel.matchLabels[a b]"], id="bad-key"),
        pytest.param({"matchLabels": {"-a": "1"}}, ["sel.matchLabels[-a]"], id="key-edge-dash"),
        pytest.param(
            {"matchLabels": {"a" * 64: "1"}}, [f"sel.matchLabels[{'a' * 64}]"], id="long-key"
        ),
        pytest.param({"matchLabels": {"/a": "1"}}, ["sel.matchLabels[/a]"], id="empty-prefix"),
        pytest.param({"matchLabels": {"A_B/a": "1"}}, ["sel.matchLabels[A_B/a]"], id="bad-prefix"),
        pytest.param({"matchLabels": {"a/": "1"}}, ["sel.matchLabels[a/]"], id="empty-name"),
        pytest.param({"matchLabels": {"a": "x y"}}, ["sel.matchLabels[a]"], id="bad-value"),
        pytest.param({"matchLabels": {"a": 1}}, ["sel.matchLabels[a]"], id="value-not-string"),
        pytest.param({"matchLabels": {1: "a"}}, ["sel.matchLabels[1]"], id="key-not-string"),
        pytest.param(
            {"matchLabels": {"a b": "x y"}},
            ["sel.matchLabels[a b]", "sel.matchLabels[a b]"],
            id="bad-key-and-value",
        ),
        pytest.param({"matchExpressions": {}}, ["sel.matchExpressions"], id="expressions-not-list"),
        pytest.param(
            {"matchExpressions": ["a"]}, ["sel.matchExpressions[0]"], id="item-not-object"
        ),
        pytest.param(
            {"matchExpressions": [{"operator": "Exists"}]},
            ["sel.matchExpressions[0].key"],
            id="missing-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["1"]}]},
            ["sel.matchExpressions[0].operator"],
            id="unknown-operator",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": ["In"], "values": ["1"]}]},
            ["sel.matchExpressions[0].operator"],
            id="operator-not-string",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["1"]}]},
            ["sel.matchExpressions[0].values"],
            id="values-on-exists",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["1"]}]},
            ["sel.matchExpressions[0].values"],
            id="values-on-doesnotexist",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            ["sel.matchExpressions[0].values"],
            id="in-without-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]},
            ["sel.matchExpressions[0].values"],
            id="notin-empty-values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": "b"}]},
            ["sel.matchExpressions[0].values"],
            id="values-not-list",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "not ok"]}]},
            ["sel.matchExpressions[0].values[1]"],
            id="bad-value-in-list",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "value": "x"}]},
            ["sel.matchExpressions[0].value"],
            id="unknown-expression-field",
        ),
        pytest.param(
            {
                "matchLabels": {"ok": "ok", "bad key": "v"},
                "matchExpressions": [
                    {"key": "a", "operator": "Exists"},
                    {"key": "b", "operator": "Nope"},
                ],
            },
            ["sel.matchLabels[bad key]", "sel.matchExpressions[1].operator"],
            id="every-error-reported",
        ),
    ],
)
def test_malformed_selector_reports_every_error_with_its_path(
    selector: object, paths: list[str]
) -> None:
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(selector, path="sel")
    assert [error.path for error in raised.value.errors] == paths
    assert str(raised.value).startswith(paths[0])


def test_empty_selector_has_no_requirements() -> None:
    assert parse_label_selector({}) == LabelSelector(())
