"""Saved plan reports (issue 23): ``plan calibrate|what-if|need --save`` store them; ``plan reports|report`` read them
through the API as the caller may see them — an admin everything, a tenant's coordinator its own rows and the
cluster-wide figures, a plain member nothing — on the thin client's path (no store, no web framework imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from meta.model.durations import utcnow
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.server import ApiServer, Listen
from meta.store import audit
from meta.store.db import Database
from meta.store.models import PlanReport
from tests.api_support import TestAuthenticator, client_env
from tests.plan_support import (
    ACME_COORD,
    ADMIN,
    BETA_COORD,
    MEMBER,
    congested_store,
    planners,
    run,
    saved_reports,
)

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "alembic", "pydantic", "fastapi", "starlette", "uvicorn", "meta.store", "meta.service",
         "meta.cycle", "meta.plan", "meta.sim", "matplotlib", "psycopg", "yaml")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    """store is the congested two-tenant history (acme, beta) with a what-if, a calibration and a need search saved."""
    url = congested_store(tmp_path_factory.mktemp("saved") / "store.sqlite", (utcnow() - timedelta(days=1)).replace(
        microsecond=0))
    return url, saved_reports(url)


@pytest.fixture(scope="module")
def api(store: tuple[str, dict[str, int]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """api serves the store with coordinators (the shared test resolver has none); yields its address."""
    service = Service(Database(store[0]))
    folder = tmp_path_factory.mktemp("api")
    server = ApiServer(create_app(service, TestAuthenticator(), planners, secrets_root=folder / "secrets"),
                       Listen(socket_path=folder / "api.sock"))
    server.start()
    try:
        yield server.addresses()[0]
    finally:
        server.stop()
        service.db.dispose()


def as_user(api: str, folder: Path, uid: int, *args: str) -> Result:
    """as_user runs the thin CLI against the API as ``uid``."""
    result = CliRunner().invoke(cli, list(args), env=client_env(api, folder, uid), prog_name="metasched")
    assert "Traceback" not in result.output, result.output
    return result


def answer(api: str, folder: Path, uid: int, *args: str) -> Any:
    result = as_user(api, folder, uid, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- saving ----------------------------------------------------------------------------------------------------


def test_a_saved_report_is_what_json_printed_with_its_plots_and_the_save_is_audited(
        store: tuple[str, dict[str, int]]) -> None:
    url, ids = store
    database = Database(url)
    try:
        with database.session() as session:
            rows = {row.kind: row for row in session.query(PlanReport)}
            lines = [line for line in audit.read(session) if line.action == "plan.save"]
    finally:
        database.dispose()
    assert {kind: row.id for kind, row in rows.items()} == ids
    assert rows["what-if"].name == "one more node" and rows["calibrate"].name == "calibration"
    assert rows["need"].name == "need"
    what_if = rows["what-if"].report
    assert what_if["scenarios"][0]["changes"] == ["--add-nodes a100:8x1"] and "cluster" in what_if
    assert {line.subject for line in lines} == {f"plan_report:{i}" for i in ids.values()}
    assert all(line.actor and "uid" in line.detail for line in lines)


def test_save_keeps_stdout_the_report_and_refuses_a_bad_name_before_writing(store: tuple[str, dict[str, int]]) -> None:
    url, _ = store
    result = run(url, "plan", "calibrate", "--since", "14d", "--save", "x" * 65, "--json")
    assert result.exit_code == 2 and "1 to 64 printable" in result.stderr
    database = Database(url)
    try:
        with database.session() as session:
            assert session.query(PlanReport).count() == 3
    finally:
        database.dispose()
    plain = run(url, "plan", "calibrate", "--since", "14d", "--json")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["tenants"]  # without --save: nothing said on stderr
    assert "saved as" not in plain.stderr


# --- reading through the API, as each caller ------------------------------------------------------------------


def test_an_admin_sees_every_report_whole(api: str, store: tuple[str, dict[str, int]], tmp_path: Path) -> None:
    _, ids = store
    heads = answer(api, tmp_path, ADMIN, "plan", "reports")
    assert [head["id"] for head in heads] == sorted(ids.values(), reverse=True)
    assert all(head["scope"] == "all" and head["saved_by"] for head in heads)
    found = answer(api, tmp_path, ADMIN, "plan", "report", str(ids["what-if"]))
    assert [row["tenant"] for row in found["figures"]["tenants"]] == ["acme", "beta"]
    assert found["figures"]["overall"]["mean_s"] and found["report"]["scenarios"]
    assert [plot["name"] for plot in found["plots"]] == ["queue_delay_by_tenant.png", "utilization.png"]
    text = as_user(api, tmp_path, ADMIN, "plan", "report", str(ids["what-if"])).stdout
    assert "acme mean delay" in text and "beta p95 delay" in text and "overall mean delay" in text
    assert "scenario: --add-nodes a100:8x1" in text  # the scenario (--name), in the report saved as "one more node"


def test_a_coordinator_sees_only_its_tenants_rows_and_the_cluster_wide_figures(
        api: str, store: tuple[str, dict[str, int]], tmp_path: Path) -> None:
    _, ids = store
    heads = answer(api, tmp_path, ACME_COORD, "plan", "reports")
    assert len(heads) == 3 and all(head["scope"] == ["acme"] and "saved_by" not in head for head in heads)
    for kind, report_id in ids.items():
        found = answer(api, tmp_path, ACME_COORD, "plan", "report", str(report_id))
        shown = json.dumps(found)
        assert "beta" not in shown, (kind, shown)  # no row, goal, note or verdict of the other tenant
        assert "report" not in found and "overall" not in found["figures"] and "notes" not in found["figures"]
        assert "jobs" not in found["context"] and "policy" not in found["context"]
        assert [plot["name"] for plot in found["plots"]] == ([] if kind == "need" else ["utilization.png"])
    what_if = answer(api, tmp_path, ACME_COORD, "plan", "report", str(ids["what-if"]))["figures"]
    assert [row["tenant"] for row in what_if["tenants"]] == ["acme"] and len(what_if["gpu_utilization"]) == 2
    need = answer(api, tmp_path, ACME_COORD, "plan", "report", str(ids["need"]))["figures"]
    assert [goal["tenant"] for goal in need["goals"]] == ["acme"]
    text = as_user(api, tmp_path, ACME_COORD, "plan", "report", str(ids["calibrate"])).stdout
    assert "acme mean delay" in text and "GPU utilization" in text and "beta" not in text


def test_another_tenants_coordinator_sees_no_row_of_acme(api: str, store: tuple[str, dict[str, int]],
                                                           tmp_path: Path) -> None:
    _, ids = store
    for report_id in ids.values():
        found = answer(api, tmp_path, BETA_COORD, "plan", "report", str(report_id))
        assert "acme" not in json.dumps(found["figures"])
    calibrate = answer(api, tmp_path, BETA_COORD, "plan", "report", str(ids["calibrate"]))
    assert [row["tenant"] for row in calibrate["figures"]["tenants"]] == ["beta"]


def test_a_plain_member_is_refused_and_a_missing_report_is_not_found(api: str, store: tuple[str, dict[str, int]],
                                                                        tmp_path: Path) -> None:
    _, ids = store
    for args in (("plan", "reports"), ("plan", "report", str(ids["what-if"]))):
        result = as_user(api, tmp_path, MEMBER, *args)
        assert result.exit_code != 0 and "coordinators" in result.stderr and result.stdout == "", result.output
    missing = as_user(api, tmp_path, ADMIN, "plan", "report", "999999")
    assert missing.exit_code != 0 and "no saved plan report 999999" in missing.stderr


def test_report_plot_writes_the_pngs_the_caller_may_see(api: str, store: tuple[str, dict[str, int]],
                                                          tmp_path: Path) -> None:
    _, ids = store
    mine, every = tmp_path / "mine", tmp_path / "every"
    assert as_user(api, tmp_path, ACME_COORD, "plan", "report", str(ids["what-if"]), "--plot", str(mine)).exit_code == 0
    assert as_user(api, tmp_path, ADMIN, "plan", "report", str(ids["what-if"]), "--plot", str(every)).exit_code == 0
    assert sorted(p.name for p in mine.iterdir()) == ["utilization.png"]
    assert sorted(p.name for p in every.iterdir()) == ["queue_delay_by_tenant.png", "utilization.png"]
    assert (mine / "utilization.png").read_bytes().startswith(b"\x89PNG")


# --- the thin client's path --------------------------------------------------------------------------------------

_PROBE = textwrap.dedent(
    """
    import atexit, json, os, sys
    def _dump():
        with open(os.environ["PROBE_OUT"], "w") as out:
            json.dump(sorted(sys.modules), out)
    atexit.register(_dump)
    from cli.main import main
    sys.argv = ["metasched", *sys.argv[1:]]
    main()
    """
)


def test_plan_reports_imports_no_store_service_or_simulator(api: str, store: tuple[str, dict[str, int]],
                                                             tmp_path: Path) -> None:
    _, ids = store
    env = {**os.environ, **{k: v or "" for k, v in client_env(api, tmp_path, ADMIN).items()},
           "PROBE_OUT": str(tmp_path / "modules.json")}
    for argv in (["plan", "reports"], ["plan", "report", str(ids["what-if"]), "--json"], ["plan", "--help"]):
        done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=REPO, capture_output=True, text=True,
                              timeout=60, env=env)
        assert done.returncode == 0, (argv, done.stderr)
        modules = json.loads((tmp_path / "modules.json").read_text())
        heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
        assert heavy == [], (argv, heavy)
