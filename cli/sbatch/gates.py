"""gates translates what makes an sbatch job wait: ``--dependency``, ``--kill-on-invalid-dep``, ``--hold``, ``--begin``.

``--dependency`` is checked and normalised here (``meta.model.dependency``; the job ids are
metasched's, as msbatch prints them) and the service checks that each named job exists and is
visible to the caller; ``--begin`` becomes an absolute UTC instant here, in the submitter's time
zone (``cli.sbatch.begin``), so ``now+10minutes`` means ten minutes after msbatch ran.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from cli.sbatch.begin import parse_begin
from cli.sbatch.options import Options, parsed
from meta.model.dependency import parse_dependency

T = TypeVar("T")


def yes_no(text: str) -> bool:
    """yes_no reads ``--kill-on-invalid-dep``: ``yes`` or ``no``, as sbatch."""
    answer = text.strip().lower()
    if answer not in {"yes", "no"}:
        raise ValueError("expected yes or no")
    return answer == "yes"


def gate_fields(options: Options, now: datetime | None = None) -> dict[str, Any]:
    """gate_fields are the spec's dependency, kill_on_invalid_dep, hold and begin (only those given)."""
    fields: dict[str, Any] = {}
    dependency = parsed(options.get("dependency"), lambda text: parse_dependency(text).normalise())
    if dependency is not None:
        fields["dependency"] = dependency
    kill = parsed(options.get("kill-on-invalid-dep"), yes_no)
    if kill is not None:
        fields["kill_on_invalid_dep"] = kill
    if options.flag("hold"):
        fields["hold"] = True
    moment = now or datetime.now(UTC)
    begin = parsed(options.get("begin"), lambda text: parse_begin(text, moment))
    if begin is not None:
        fields["begin"] = begin.isoformat()
    return fields
