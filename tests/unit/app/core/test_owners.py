from typing import Any

import pytest

from app.core.owners import controller_of, link, owner_chain
from app.core.pods import OwnerRef
from app.core.pods import owner_ref as ref

RS = ref("apps/v1", "ReplicaSet", "web-5d8f7c9b4", True)
DEPLOYMENT = ref("apps/v1", "Deployment", "web", True)
JOB = ref("batch/v1", "Job", "nightly-29416740", True)
CRONJOB = ref("batch/v1", "CronJob", "nightly", True)
ROLLOUT = ref("argoproj.io/v1alpha1", "Rollout", "web", True)
NODE = ref("v1", "Node", "node-1", False)


def rs(name: str) -> OwnerRef:
    return ref("apps/v1", "ReplicaSet", name, True)


@pytest.mark.parametrize(
    ("owners", "parents", "chain"),
    [
        pytest.param((), {}, (), id="no-owner"),
        pytest.param((RS,), {RS: DEPLOYMENT}, (RS, DEPLOYMENT), id="deployment"),
        pytest.param((JOB,), {JOB: CRONJOB}, (JOB, CRONJOB), id="cronjob"),
        pytest.param((RS,), {RS: ROLLOUT}, (RS, ROLLOUT), id="scalable-custom-resource"),
        pytest.param((RS,), {}, (RS,), id="controller-unknown"),
        # Only ReplicaSets' and Jobs' controllers are looked up: a Deployment's is not.
        pytest.param((RS,), {RS: DEPLOYMENT, DEPLOYMENT: ROLLOUT}, (RS, DEPLOYMENT), id="stops"),
        # Owners that are not the controller are kept, and not walked.
        pytest.param((NODE, RS), {RS: DEPLOYMENT}, (NODE, RS, DEPLOYMENT), id="other-owners"),
        pytest.param(
            (rs("a"),), {rs("a"): rs("b"), rs("b"): rs("a")}, (rs("a"), rs("b")), id="cycle"
        ),
        pytest.param(
            (rs("0"),),
            {rs(str(n)): rs(str(n + 1)) for n in range(20)},
            tuple(rs(str(n)) for n in range(8)),
            id="bounded",
        ),
    ],
)
def test_owner_chain(
    owners: tuple[OwnerRef, ...], parents: dict[OwnerRef, OwnerRef], chain: tuple[OwnerRef, ...]
) -> None:
    assert owner_chain(owners, parents.get) == chain


def owned(*refs: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-5d8f7c9b4", "ownerReferences": list(refs)}}


DEPLOYMENT_REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True}


@pytest.mark.parametrize(
    ("obj", "controller"),
    [
        pytest.param(owned(DEPLOYMENT_REF), DEPLOYMENT, id="controller"),
        pytest.param(
            owned({**DEPLOYMENT_REF, "controller": False}, {**DEPLOYMENT_REF, "name": "web"}),
            DEPLOYMENT,
            id="the-one-marked",
        ),
        pytest.param(owned({**DEPLOYMENT_REF, "controller": False}), None, id="none-marked"),
        pytest.param({"metadata": {"name": "bare"}}, None, id="no-owners"),
        pytest.param({"metadata": {"ownerReferences": "garbage"}}, None, id="malformed"),
        pytest.param(owned("garbage"), None, id="malformed-entry"),
        pytest.param({}, None, id="no-metadata"),
    ],
)
def test_controller_of(obj: dict[str, Any], controller: OwnerRef | None) -> None:
    assert controller_of(obj) == controller


def test_objects_with_one_controller_share_one_link() -> None:
    first = link(owned(DEPLOYMENT_REF))
    assert first == (DEPLOYMENT,)
    assert link(owned(dict(DEPLOYMENT_REF))) is first
    assert link({"metadata": {"name": "bare"}}) == ()
