"""Priority is a right (issue 21): the pure rule of which classes and deadlines a submitter may ask for."""

from __future__ import annotations

import pytest

from meta.model.kinds import JobKind
from meta.policy.config import DEFAULT_PRIORITY_CLASSES
from meta.policy.priority_rights import (
    DEADLINE_CLASS,
    INVALID_QOS,
    PriorityRequest,
    PriorityRights,
    needed_class,
    priority_refusal,
)

MEMBER = PriorityRights()
TRAINING, INFERENCE, EVALUATION = JobKind.TRAINING, JobKind.INFERENCE, JobKind.EVALUATION


def _refusal(request: PriorityRequest, rights: PriorityRights = MEMBER, **kw: object) -> str | None:
    found = priority_refusal(request, rights, user="alice", tenant="tenant-a", **kw)  # type: ignore[arg-type]
    return None if found is None else found.message


@pytest.mark.parametrize(
    ("kind", "asked"),
    [
        (TRAINING, None),
        (TRAINING, "training"),
        (TRAINING, "inference"),
        (TRAINING, "evaluation"),
        (INFERENCE, None),
        (INFERENCE, "inference"),
        (INFERENCE, "evaluation"),
        (EVALUATION, "evaluation"),
    ],
)
def test_a_member_may_ask_for_its_kinds_class_or_lower(kind: JobKind, asked: str | None) -> None:
    request = PriorityRequest(kind, asked)
    assert needed_class(request) is None
    assert _refusal(request) is None


@pytest.mark.parametrize(
    ("kind", "asked"),
    [
        (TRAINING, "inference-deadline"),
        (INFERENCE, "inference-deadline"),
        (INFERENCE, "training"),
        (EVALUATION, "inference"),
        (EVALUATION, "training"),
    ],
)
def test_a_higher_class_is_refused_to_a_member_in_sbatchs_words(kind: JobKind, asked: str) -> None:
    message = _refusal(PriorityRequest(kind, asked))
    assert message is not None and message.startswith(f"{INVALID_QOS}: priority class {asked} ")
    assert "\n" not in message and f"--allow-class {asked}" in message and "tenant-a" in message


def test_a_deadline_needs_the_deadline_class_whatever_class_is_named() -> None:
    for asked in (None, "inference", "evaluation"):
        request = PriorityRequest(INFERENCE, asked, has_deadline=True)
        assert needed_class(request) == DEADLINE_CLASS
        refusal = priority_refusal(request, MEMBER, user="alice", tenant="tenant-a")
        assert refusal is not None and refusal.deadline and refusal.priority_class == DEADLINE_CLASS
        assert refusal.message.startswith("a deadline is not allowed for alice in tenant-a")


@pytest.mark.parametrize(
    "rights",
    [
        PriorityRights(
            qos=frozenset({"normal", "inference-deadline"})
        ),  # the association's QOS, as sbatch --qos
        PriorityRights(
            allowed_classes=frozenset({"inference-deadline"})
        ),  # the admin's setting for the tenant
        PriorityRights(admin=True),
    ],
)
def test_a_qos_of_the_class_name_the_admins_list_or_being_admin_is_the_right(rights: PriorityRights) -> None:
    assert _refusal(PriorityRequest(INFERENCE, "inference-deadline"), rights) is None
    assert _refusal(PriorityRequest(INFERENCE, None, has_deadline=True), rights) is None
    assert _refusal(PriorityRequest(TRAINING, "inference-deadline"), rights) is None


def test_a_right_to_one_class_is_not_a_right_to_another() -> None:
    rights = PriorityRights(qos=frozenset({"high", "training"}), allowed_classes=frozenset({"inference"}))
    assert _refusal(PriorityRequest(INFERENCE, "training"), rights) is None
    assert _refusal(PriorityRequest(EVALUATION, "inference"), rights) is None
    assert _refusal(PriorityRequest(TRAINING, "inference-deadline"), rights) is not None
    assert _refusal(PriorityRequest(INFERENCE, None, has_deadline=True), rights) is not None


def test_the_policys_ranks_decide_what_is_higher() -> None:
    # a site that ranks evaluation above training: asking for it from a training job is a right
    ranks = {**DEFAULT_PRIORITY_CLASSES, "evaluation": 250}
    assert _refusal(PriorityRequest(TRAINING, "evaluation")) is None
    message = _refusal(PriorityRequest(TRAINING, "evaluation"), ranks=ranks)
    assert message is not None and "priority class evaluation" in message
    assert _refusal(PriorityRequest(EVALUATION, "training"), ranks=ranks) is None


def test_a_qos_is_checked_against_the_association_like_sbatch() -> None:
    from meta.policy.priority_rights import qos_refusal

    assert qos_refusal(None, MEMBER, user="alice", tenant="tenant-a") is None
    assert qos_refusal("normal", PriorityRights(qos=frozenset({"normal"})), user="alice", tenant="tenant-a") is None
    assert qos_refusal("high", PriorityRights(admin=True), user="root", tenant="tenant-a") is None
    refused = qos_refusal("high", PriorityRights(qos=frozenset({"normal"})), user="alice", tenant="tenant-a")
    assert refused is not None and refused.message.startswith(INVALID_QOS) and "high" in refused.message
