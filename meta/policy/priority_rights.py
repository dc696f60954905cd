"""Priority is a right: which priority classes and deadlines a submitter may ask for (issue 21).

A plain member may ask for its job kind's own class or a lower one (a training job may run as
``inference`` or ``evaluation``, never above ``training``). A higher class, and any deadline
(a deadline makes an inference job ``inference-deadline`` and puts it in the urgent tier, ahead
of every class, allowed to preempt), is a right: the caller's Slurm association in the tenant
allows a QOS of the class's name (as Slurm checks ``sbatch --qos``), or an admin listed the
class for the tenant (``metasched tenant set T --allow-class C``), or the caller is an admin.

Pure: the service reads the association's QOS and the tenant's setting and calls this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from meta.model.kinds import JobKind, PriorityClass
from meta.policy.config import DEFAULT_PRIORITY_CLASSES

DEADLINE_CLASS = PriorityClass.DEADLINE_INFERENCE.value  # what a deadline needs the right to
# sbatch's words for a QOS the association does not allow (msbatch users grep for them)
INVALID_QOS = "Invalid qos specification"


@dataclass(frozen=True)
class PriorityRights:
    """PriorityRights is what the caller holds in one tenant: admin, its association's QOS, the admin's list."""

    admin: bool = False
    qos: frozenset[str] = frozenset()  # the QOS the caller's association in the tenant allows
    allowed_classes: frozenset[str] = frozenset()  # the classes an admin allowed the tenant's members

    def holds(self, priority_class: str) -> bool:
        """holds tells whether the caller may ask for ``priority_class`` whatever its job kind."""
        return self.admin or priority_class in self.qos or priority_class in self.allowed_classes


@dataclass(frozen=True)
class PriorityRequest:
    """PriorityRequest is what one job asks for: its kind, the class it names (None: the kind's) and a deadline."""

    kind: JobKind
    priority_class: str | None = None
    has_deadline: bool = False


@dataclass(frozen=True)
class PriorityRefusal:
    """PriorityRefusal names the class (or the deadline) asked for without the right, in one line."""

    priority_class: str
    deadline: bool
    message: str


def needed_class(request: PriorityRequest, ranks: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES) -> str | None:
    """needed_class is the class a request needs a right to (None: the kind's own class or lower, no deadline)."""
    if request.has_deadline:
        return DEADLINE_CLASS
    if request.priority_class is None or request.priority_class == request.kind.value:
        return None
    own = ranks.get(request.kind.value, 0)
    # an unknown name ranks nowhere (the policy falls back to the kind's class): never above the kind
    return request.priority_class if ranks.get(request.priority_class, own) > own else None


def priority_refusal(
    request: PriorityRequest,
    rights: PriorityRights,
    *,
    user: str,
    tenant: str,
    ranks: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES,
) -> PriorityRefusal | None:
    """priority_refusal is why ``user`` may not submit ``request`` to ``tenant`` (None: allowed)."""
    wanted = needed_class(request, ranks)
    if wanted is None or rights.holds(wanted):
        return None
    how = (f"a Slurm QOS named {wanted} in the association of {user} in {tenant}, or an admin's "
           f"`metasched tenant set {tenant} --allow-class {wanted}`")  # fmt: skip
    if request.has_deadline:
        message = (
            f"a deadline is not allowed for {user} in {tenant}: it needs the {wanted} priority class ({how})"
        )
    else:
        message = f"{INVALID_QOS}: priority class {wanted} is above this {request.kind.value} job's own class and needs {how}"
    return PriorityRefusal(wanted, request.has_deadline, message)


def qos_refusal(qos: str | None, rights: PriorityRights, *, user: str, tenant: str) -> PriorityRefusal | None:
    """qos_refusal is why ``user`` may not name ``qos`` in ``tenant`` (None: allowed), as sbatch --qos is checked.

    Slurm refuses a QOS the submitter's association does not list; metasched carries the QOS to
    Slurm at launch, so refusing it at submit is what keeps the refusal where sbatch puts it
    (not a launch failure minutes later).
    """
    if qos is None or rights.admin or qos in rights.qos:
        return None
    return PriorityRefusal(qos, False, f"{INVALID_QOS}: QOS {qos} is not in the association of {user} in {tenant}")
