"""Rolling upgrades: which migrations a store still needs, whether each is safe beside older replicas, and who runs.

Every migration declares, at module level, ``ONLINE_SAFE`` (a bool: may ``metasched db upgrade``
apply it while replicas of the version before still run?) and ``ONLINE_REASON`` (one line saying
why). Expand-only changes are safe: a new table, a nullable column, a column with a constant
default, an index older replicas never notice. A change older replicas would misread is not:
dropping or renaming what they use, NOT NULL without a default, or a column whose meaning their
leader would ignore (a hold it does not honour, an owner it does not run jobs as).
``tests/store/test_schema_plan.py`` fails when a migration declares neither; a migration that
does not declare is taken as not online-safe.

``db upgrade`` refuses a plan with a migration that is not online-safe while anything still
seems to run on the store (``running_on``): a fresh leader lease, and on PostgreSQL the other
client sessions of the database that could be metasched's — none names itself today, so unnamed
sessions count, and so does any whose ``application_name`` starts with ``metasched``; psql,
pg_dump and other tools that name themselves do not. Standby replicas hold pooled connections, so
they show up as sessions although they hold no lease. docs/upgrades.md has the procedure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.errors import MetaschedError
from meta.store.models import LeaderLease

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
LEASE_ROW = "scheduler"  # meta.cycle.lease.LEASE_NAME: the row the cycle's leader holds
UPGRADE = "metasched db upgrade"


@dataclass(frozen=True)
class Step:
    """Step is one migration: its revision, the first line of its docstring and its rolling-upgrade declaration."""

    revision: str
    summary: str
    online_safe: bool
    reason: str

    def line(self) -> str:
        """line is the step as the plan prints it."""
        safety = "online-safe" if self.online_safe else "NOT online-safe"
        return f"{self.revision}  {safety:<15}  {self.summary}\n      {self.reason}"

    def as_dict(self) -> dict[str, object]:
        """as_dict is the step for --json."""
        return {"revision": self.revision, "summary": self.summary, "online_safe": self.online_safe,
                "reason": self.reason}  # fmt: skip


class SchemaMismatch(MetaschedError):
    """SchemaMismatch: the store's schema is not the one this version runs on."""


class SchemaBehind(SchemaMismatch):
    """SchemaBehind: the store is at an older revision; ``metasched db upgrade`` must run first."""

    def __init__(self, current: str, head: str, steps: list[Step]):
        pending = ", ".join(f"{s.revision} {'online-safe' if s.online_safe else 'NOT online-safe'}" for s in steps)
        super().__init__(f"the store is at schema {current}, this version needs {head} (pending: {pending}): "
                         f"run `{UPGRADE}`")  # fmt: skip
        self.current, self.head, self.steps = current, head, steps


class SchemaNewer(SchemaMismatch):
    """SchemaNewer: the store is at a revision this version does not ship (a newer metasched migrated it)."""

    def __init__(self, current: str, head: str):
        super().__init__(f"the store is at schema {current}, which this version does not ship (its newest is "
                         f"{head}): a newer metasched migrated it; run that version")  # fmt: skip
        self.current, self.head = current, head


class UpgradeRefused(MetaschedError):
    """UpgradeRefused: a pending migration is not online-safe and something still runs on the store."""


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory(str(MIGRATIONS_DIR))


def declaration(module: ModuleType) -> tuple[bool | None, str]:
    """declaration is a migration module's (ONLINE_SAFE, ONLINE_REASON); None when it declares no bool."""
    safe = getattr(module, "ONLINE_SAFE", None)
    reason = getattr(module, "ONLINE_REASON", "")
    return (safe if isinstance(safe, bool) else None), (reason if isinstance(reason, str) else "")


@lru_cache(maxsize=1)
def shipped() -> tuple[Step, ...]:
    """shipped is every migration of this version, oldest first."""
    steps = []
    for script in _scripts().walk_revisions():
        safe, reason = declaration(script.module)
        summary = (script.doc or "").strip().splitlines()[0] if script.doc else ""
        steps.append(Step(script.revision, summary, bool(safe), reason if safe is not None else
                          "declares no ONLINE_SAFE: taken as not online-safe"))  # fmt: skip
    return tuple(reversed(steps))


def head() -> str:
    """head is the newest migration this version ships."""
    return shipped()[-1].revision


def known(revision: str) -> bool:
    """known tells whether a revision is one this version ships."""
    return any(step.revision == revision for step in shipped())


def pending(current: str | None) -> list[Step]:
    """pending are the migrations from ``current`` (exclusive; None: an empty store) to head, oldest first.

    Raises SchemaNewer when ``current`` is a revision this version does not ship.
    """
    steps = list(shipped())
    if current is None:
        return steps
    for index, step in enumerate(steps):
        if step.revision == current:
            return steps[index + 1 :]
    raise SchemaNewer(current, head())


# --- what runs on the store -------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseState:
    """LeaseState is the leader lease row as read now (None fields: no row, or no table yet)."""

    holder: str | None = None
    epoch: int | None = None
    expires_at: datetime | None = None

    @property
    def fresh(self) -> bool:
        """fresh: a replica holds an unexpired lease, so one leads now."""
        return self.expires_at is not None and self.expires_at > utcnow()


def read_lease(engine: Engine) -> LeaseState:
    """read_lease reads the leader lease row without locking it (an empty LeaseState when there is none)."""
    if not inspect(engine).has_table(LeaderLease.__tablename__):
        return LeaseState()
    with Session(engine) as session:
        row = session.scalar(select(LeaderLease).where(LeaderLease.name == LEASE_ROW))
        return LeaseState(row.holder, row.epoch, row.expires_at) if row is not None else LeaseState()


_SESSIONS = text(
    "SELECT pid, COALESCE(application_name, '') AS app, COALESCE(host(client_addr), 'a local socket') AS addr, "
    "backend_start FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND backend_type = 'client backend' ORDER BY backend_start"
)


def running_on(engine: Engine) -> list[str]:
    """running_on says, one line each, what still runs on the store: its leader and, on PostgreSQL, other sessions.

    Call it before opening any other connection of this process: each of this engine's other
    open connections would count too.
    """
    found = []
    lease = read_lease(engine)
    if lease.fresh:
        assert lease.expires_at is not None
        found.append(f"metasched serve {lease.holder!r} leads (epoch {lease.epoch}, lease until "
                     f"{lease.expires_at.isoformat(timespec='seconds')})")  # fmt: skip
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            for row in connection.execute(_SESSIONS):
                if row.app and not row.app.startswith("metasched"):
                    continue  # psql, pg_dump, an exporter: not a replica
                name = f"'{row.app}'" if row.app else "no application name"
                found.append(f"PostgreSQL session {row.pid} from {row.addr} since "
                             f"{row.backend_start.isoformat(timespec='seconds')} ({name})")  # fmt: skip
    return found


def refusal(steps: list[Step], running: list[str]) -> str | None:
    """refusal is why ``db upgrade`` must not apply ``steps`` now, or None when it may."""
    unsafe = [step.revision for step in steps if not step.online_safe]
    if not unsafe or not running:
        return None
    return (f"refused: {', '.join(unsafe)} {'is' if len(unsafe) == 1 else 'are'} not online-safe, and the store is "
            f"still in use ({'; '.join(running)}). Stop every replica of the older version (standbys too), then run "
            f"`{UPGRADE}` again; if only what is not a replica is left, add --offline-ok")  # fmt: skip


def plan_text(where: str, current: str | None, steps: list[Step], running: list[str]) -> str:
    """plan_text is the store (its redacted URL), each pending migration with its declaration, and what runs on it."""
    lines = [f"{where}: at {current or 'empty'}, head {head()}, {len(steps)} pending"]
    lines += [f"  {step.line()}" for step in steps]
    if running:
        lines += ["in use by:", *(f"  {what}" for what in running)]
    elif current is not None and steps:
        lines.append("in use by: nothing seen (no fresh leader lease, no other session)")
    return "\n".join(lines)


def verdict(steps: list[Step], running: list[str], offline_ok: bool) -> str:
    """verdict is what ``db upgrade`` would do with ``steps`` now, in one line."""
    if not steps:
        return "nothing to apply"
    why_not = None if offline_ok else refusal(steps, running)
    if why_not is not None:
        return why_not
    if all(step.online_safe for step in steps):
        return "db upgrade would apply them: every one is online-safe"
    if not running:
        return "db upgrade would apply them: nothing runs on the store"
    return "db upgrade would apply them: --offline-ok says every older replica is stopped"


def newer_schema(engine: Engine) -> str | None:
    """newer_schema is the store's revision when this version does not ship it (a newer metasched migrated it), else None.

    A store with no revision recorded (an empty one, or one made without Alembic) is not newer.
    """
    if not inspect(engine).has_table("alembic_version"):
        return None
    with engine.connect() as connection:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return revision if revision is not None and not known(revision) else None
