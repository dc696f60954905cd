"""The import rules between the project's packages (README "Layout"): each layer imports only what its row allows.

The rules keep the core honest: ``meta.model`` is the vocabulary and depends on nothing of the
project; the policy is pure and sees only the model; the simulator never reaches the store, the
daemon's cycle or Slurm; ``slurm_bridge`` speaks Slurm in the model's words only; nothing but the
CLI itself imports ``cli``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("meta", "slurm_bridge", "checkpoint", "tenants", "cli")

# layer -> the project layers its modules may import (a layer may always import itself)
ALLOWED: dict[str, frozenset[str]] = {
    "meta.model": frozenset(),
    "meta.policy": frozenset({"meta.model"}),
    "meta.config": frozenset({"meta.model", "meta.policy"}),
    "meta.sim": frozenset({"meta.model", "meta.policy", "meta.config"}),
    "meta.store": frozenset({"meta.model"}),
    "meta.service": frozenset({"meta.model", "meta.policy", "meta.store", "tenants", "checkpoint"}),
    "meta.cycle": frozenset({"meta.model", "meta.policy", "meta.config", "meta.store", "slurm_bridge", "checkpoint"}),
    "slurm_bridge": frozenset({"meta.model"}),
    "checkpoint": frozenset({"meta.model", "meta.store"}),
    # tenants reads Slurm's associations (sacctmgr) through slurm_bridge: they are its authorization
    "tenants": frozenset({"meta.model", "meta.store", "slurm_bridge"}),
    # the daemon's start-up wires the cycle, the API and the store together: nothing imports it but `serve`
    "meta.serve": frozenset({"meta.model", "meta.policy", "meta.config", "meta.store", "meta.service", "meta.cycle",
                             "slurm_bridge", "tenants"}),
    # capacity planning reads the site's history from the store; its gates are the daemon's own (meta.cycle);
    # calibration replays that history in the simulator (which itself never reaches the store)
    "meta.plan": frozenset({"meta.model", "meta.policy", "meta.store", "meta.cycle", "meta.sim"}),
    "cli": frozenset({"meta.model", "meta.policy", "meta.config", "meta.sim", "meta.store", "meta.service",
                      "meta.cycle", "meta.serve", "meta.plan", "slurm_bridge", "checkpoint", "tenants"}),
}
# layer -> the only modules of the importing layers that may import it (the CLI's `serve` and `doctor` commands alone:
# the doctor checks a site with the daemon's own settings)
ONLY_FROM: dict[str, frozenset[str]] = {"meta.serve": frozenset({"cli.serve_cmd", "cli.doctor_cmd"})}
# the thin client speaks the API: of cli, only local mode's wiring (it runs the API's app in process)
# and the store's own admin commands, `db` and `plan`, reach the store or the service (README "Layout")
CLI_WIRING = frozenset({"cli.local", "cli.db_cmd", "cli.plan_cmd"})
KEPT_FROM_CLI = frozenset({"meta.store", "meta.service"})


@dataclass(frozen=True)
class Violation:
    """Violation is one import that its layer's rule does not allow."""

    path: str
    line: int
    imported: str
    layer: str

    def __str__(self) -> str:
        target = _target_layer(self.imported)
        if self.layer == "cli" and target in KEPT_FROM_CLI:
            return (f"{self.path}:{self.line} imports {self.imported}: cli may import it only from "
                    + ", ".join(sorted(CLI_WIRING)) + " (the thin client speaks the API)")
        if target in ONLY_FROM and target in ALLOWED[self.layer]:
            return f"{self.path}:{self.line} imports {self.imported}: {self.layer} may import it only from " + ", ".join(
                sorted(ONLY_FROM[target]))
        allowed = ", ".join(sorted(ALLOWED[self.layer] | {self.layer}))
        return f"{self.path}:{self.line} imports {self.imported}: {self.layer} may import only {allowed}"


def layer_of(module: str) -> str | None:
    """layer_of is the layer a dotted module name belongs to (the longest rule prefix), or None."""
    matches = [layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")]
    if matches:
        return max(matches, key=len)
    top = module.split(".")[0]
    return module if top in PACKAGES else None  # e.g. bare ``meta``: a project module with no rule


def module_name(path: Path, root: Path) -> str:
    """module_name is the dotted name of a source file under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """imported_modules lists (line, absolute module) for every import in ``tree``, relative ones resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from meta import audit`` imports the module meta.audit: such a name is judged as a module
            found.extend((node.lineno, _from_target(base, alias.name)) for alias in node.names)
    return found


def _from_target(base: str, name: str) -> str:
    """_from_target is what ``from base import name`` imports: ``base`` itself, or ``base.name`` when base has no rule."""
    return base if base.split(".")[0] not in PACKAGES or layer_of(base) in ALLOWED else f"{base}.{name}"


def violations(root: Path) -> list[Violation]:
    """violations checks every project source file under ``root`` against ALLOWED."""
    found: list[Violation] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(path, root)
            # the umbrella ``meta/__init__.py`` holds only a docstring: it is held to the model's rule
            layer = "meta.model" if module == "meta" else layer_of(module)
            assert layer in ALLOWED, f"{path}: {module} belongs to no layer of ALLOWED"
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, imported in imported_modules(tree, module, path.name == "__init__.py"):
                target = _target_layer(imported)
                if target is None or target == layer or (target in ALLOWED[layer] and _may_reach(module, target)):
                    continue
                found.append(Violation(str(path.relative_to(root)), line, imported, layer))
    return found


def _may_reach(module: str, target: str) -> bool:
    """_may_reach tells whether ``module`` is one of the few that may import a layer kept to ONLY_FROM."""
    if target in KEPT_FROM_CLI and layer_of(module) == "cli" and module not in CLI_WIRING:
        return False
    return target not in ONLY_FROM or module in ONLY_FROM[target]


def _target_layer(imported: str) -> str | None:
    """_target_layer is the layer of an imported module, None outside the project."""
    return layer_of(imported) if imported.split(".")[0] in PACKAGES else None


def test_every_import_keeps_its_layers_rule() -> None:
    found = violations(ROOT)
    assert not found, "import rules broken (README 'Layout'):\n" + "\n".join(map(str, found))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
    return tmp_path


@pytest.mark.parametrize(
    ("path", "source", "want"),
    [
        ("meta/policy/x.py", "from meta.store.models import Job\n", "imports meta.store.models: meta.policy"),
        ("meta/policy/x.py", "import meta.cycle.daemon\n", "imports meta.cycle.daemon: meta.policy"),
        ("meta/sim/x.py", "from meta.store import db\n", "imports meta.store: meta.sim"),
        ("meta/sim/x.py", "from slurm_bridge.client import SlurmClient\n", "meta.sim may import only"),
        ("meta/sim/x.py", "from cli.main import main\n", "imports cli.main: meta.sim"),
        ("slurm_bridge/x.py", "from meta.policy.snapshot import JobKind\n", "slurm_bridge may import only"),
        ("slurm_bridge/x.py", "from meta.cycle import lease\n", "imports meta.cycle: slurm_bridge"),
        ("meta/model/x.py", "from meta.policy.config import SchedulerConfig\n", "meta.model may import only meta.model"),
        ("meta/model/x.py", "from meta import audit\n", "imports meta.audit: meta.model"),
        ("meta/cycle/x.py", "from cli.output import emit\n", "imports cli.output: meta.cycle"),
        ("tenants/x.py", "def f():\n    from cli import main\n", "tenants/x.py:2 imports cli: tenants"),
        ("meta/policy/sub/x.py", "from ...store import models\n", "imports meta.store: meta.policy"),
        ("cli/x.py", "from meta.serve.run import serve\n",
         "imports meta.serve.run: cli may import it only from cli.doctor_cmd, cli.serve_cmd"),
        ("meta/service/x.py", "from meta.serve import settings\n", "imports meta.serve: meta.service may"),
        # the thin client: a command module reaching the store or the service, even lazily
        ("cli/x.py", "def f():\n    from meta.store.db import resolve_url\n",
         "cli/x.py:2 imports meta.store.db: cli may import it only from cli.db_cmd, cli.local"),
        ("cli/sbatch/x.py", "from meta.service.operations import Operations\n",
         "imports meta.service.operations: cli may import it only from cli.db_cmd, cli.local"),
    ],
)
def test_a_broken_rule_is_named(tmp_path: Path, path: str, source: str, want: str) -> None:
    root = _tree(tmp_path, {path: source})
    found = [str(v) for v in violations(root)]
    assert len(found) == 1 and want in found[0], found


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("meta/policy/x.py", "from meta.model.kinds import JobKind\nfrom meta.policy import plan\n"),
        ("meta/sim/x.py", "from meta.config.policy_file import load_policy_config\nimport yaml\n"),
        ("slurm_bridge/x.py", "from meta.model.resources import ResourceVector\nfrom . import errors\n"),
        ("cli/x.py", "from meta.cycle.daemon import Daemon\nfrom cli.output import emit\n"),
        ("cli/serve_cmd.py", "from meta.serve.run import serve\n"),
        ("cli/doctor_cmd.py", "from meta.serve.doctor.run import run_checks\n"),
        ("cli/local.py", "from meta.service.http import create_app\nfrom meta.store.db import resolve_url\n"),
        ("meta/serve/x.py", "from meta.cycle.daemon import DaemonConfig\nfrom meta.service.api import Service\n"),
    ],
)
def test_an_allowed_import_passes(tmp_path: Path, path: str, source: str) -> None:
    assert violations(_tree(tmp_path, {path: source})) == []


def test_a_store_import_planted_in_a_copy_of_the_thin_client_fails(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(ROOT / "cli", tmp_path / "cli", ignore=shutil.ignore_patterns("__pycache__"))
    root = _tree(tmp_path, {})
    assert violations(root) == []  # the real thin client keeps the rule
    command = root / "cli" / "jobs_cmd.py"
    command.write_text(command.read_text() + "\n\ndef _direct():\n    from meta.service.api import Service\n")
    found = [str(v) for v in violations(root)]
    assert len(found) == 1 and "cli/jobs_cmd.py" in found[0] and "the thin client speaks the API" in found[0], found
