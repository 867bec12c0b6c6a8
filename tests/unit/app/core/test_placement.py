from typing import Any

import pytest

from app.core.placement import Taint, placement, repelling_taints
from app.core.views import node_record
from tests.unit.app.builders import node

Obj = dict[str, Any]
NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _term(*expressions: Obj, fields: tuple[Obj, ...] = ()) -> Obj:
    term: Obj = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = list(fields)
    return term


def _required(*terms: Obj) -> Obj:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def _expression(key: str, operator: str, *values: str) -> Obj:
    return {"key": key, "operator": operator, "values": list(values)}


CASES = {
    "no-constraint": ({}, {}, True),
    "node-name-is-the-node": ({"nodeName": "n1"}, {}, True),
    "node-name-is-another-node": ({"nodeName": "n2"}, {}, False),
    "node-name-overrides-taints": ({"nodeName": "n1"}, {"taints": [NO_SCHEDULE]}, True),
    "node-selector-matches": ({"nodeSelector": {"zone": "a"}}, {"labels": {"zone": "a"}}, True),
    "node-selector-differs": ({"nodeSelector": {"zone": "a"}}, {"labels": {"zone": "b"}}, False),
    "affinity-in": (
        {"affinity": _required(_term(_expression("zone", "In", "a", "b")))},
        {"labels": {"zone": "b"}},
        True,
    ),
    "affinity-not-in": (
        {"affinity": _required(_term(_expression("zone", "NotIn", "a")))},
        {"labels": {"zone": "a"}},
        False,
    ),
    "affinity-does-not-exist": (
        {"affinity": _required(_term(_expression("gpu", "DoesNotExist")))},
        {"labels": {"gpu": "x"}},
        False,
    ),
    "affinity-terms-are-ored": (
        {
            "affinity": _required(
                _term(_expression("zone", "In", "x")), _term(_expression("zone", "In", "a"))
            )
        },
        {"labels": {"zone": "a"}},
        True,
    ),
    "affinity-and-node-selector-both-hold": (
        {
            "nodeSelector": {"zone": "a"},
            "affinity": _required(_term(_expression("disk", "Exists"))),
        },
        {"labels": {"zone": "a"}},
        False,
    ),
    # Numeric comparisons are read as "the label exists": more nodes, never fewer.
    "affinity-gt-counts-as-exists": (
        {"affinity": _required(_term(_expression("cores", "Gt", "64")))},
        {"labels": {"cores": "8"}},
        True,
    ),
    "daemonset-pin-to-this-node": (
        {"affinity": _required(_term(fields=(_expression("metadata.name", "In", "n1"),)))},
        {},
        True,
    ),
    "daemonset-pin-to-another-node": (
        {"affinity": _required(_term(fields=(_expression("metadata.name", "In", "n2"),)))},
        {},
        False,
    ),
    "untolerated-no-schedule": ({}, {"taints": [NO_SCHEDULE]}, False),
    "untolerated-no-execute": ({}, {"taints": [{**NO_SCHEDULE, "effect": "NoExecute"}]}, False),
    "prefer-no-schedule-only-steers": (
        {},
        {"taints": [{**NO_SCHEDULE, "effect": "PreferNoSchedule"}]},
        True,
    ),
    "tolerated-by-equal": (
        {
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ]
        },
        {"taints": [NO_SCHEDULE]},
        True,
    ),
    "equal-is-the-default-operator": (
        {"tolerations": [{"key": "dedicated", "value": "gpu"}]},
        {"taints": [NO_SCHEDULE]},
        True,
    ),
    "equal-with-another-value": (
        {"tolerations": [{"key": "dedicated", "value": "cpu"}]},
        {"taints": [NO_SCHEDULE]},
        False,
    ),
    "exists-tolerates-any-value": (
        {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        {"taints": [NO_SCHEDULE]},
        True,
    ),
    "exists-without-a-key-tolerates-everything": (
        {"tolerations": [{"operator": "Exists"}]},
        {"taints": [NO_SCHEDULE]},
        True,
    ),
    "another-effect-does-not-tolerate": (
        {"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]},
        {"taints": [NO_SCHEDULE]},
        False,
    ),
    "every-taint-must-be-tolerated": (
        {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        {"taints": [NO_SCHEDULE, {"key": "os", "value": "windows", "effect": "NoSchedule"}]},
        False,
    ),
}


@pytest.mark.parametrize(("spec", "node_args", "allowed"), list(CASES.values()), ids=list(CASES))
def test_which_nodes_a_pod_may_be_bound_to(spec: Obj, node_args: Obj, allowed: bool) -> None:
    candidate = node_record(node("n1", **node_args))
    assert placement(spec).allows(candidate) is allowed


def test_only_repelling_taints_are_kept() -> None:
    obj = node("n1", taints=[NO_SCHEDULE, {"key": "x", "effect": "PreferNoSchedule"}])
    assert repelling_taints(obj) == (Taint("dedicated", "gpu", "NoSchedule"),)


def test_candidates_keep_the_order_given() -> None:
    nodes = [
        node_record(node(name, labels={"zone": zone}))
        for name, zone in (("c", "a"), ("b", "x"), ("a", "a"))
    ]
    assert [n.name for n in placement({"nodeSelector": {"zone": "a"}}).candidates(nodes)] == [
        "c",
        "a",
    ]
