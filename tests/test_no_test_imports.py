"""Nothing that ships, and no benchmark, imports the test tree: the harnesses they need ship (issue 20).

``FakeSlurm`` lives in ``slurm_bridge/fake.py`` and ``truncate_all`` in ``meta/store/reset.py`` for
this reason; a benchmark that reached into ``tests`` would run only from a checkout with the tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("meta", "slurm_bridge", "checkpoint", "tenants", "cli", "benchmarks")


def imports_of_tests(path: Path) -> list[tuple[int, str]]:
    """imports_of_tests lists (line, module) of every import of ``tests`` in one source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        found += [(node.lineno, n) for n in names if n == "tests" or n.startswith("tests.")]
    return found


def test_no_shipped_module_or_benchmark_imports_tests() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, module in imports_of_tests(path)
    ]
    assert not found, "the test tree is not shipped:\n" + "\n".join(found)
