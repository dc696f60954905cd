"""The period's one numbering, checked everywhere it is written: no step renumbered in one place only.

``meta/cycle/daemon.py``'s docstring is the numbering (``N. name (``path``): ...``). It must agree
with the ``# N. name`` comments over the calls of ``Daemon.period``, with the first docstring line
of each step's module or package (``Cycle step N, name: ...``), with every ``step N (name)`` a
helper of ``meta/cycle`` mentions, with the README's picture of the cycle and with
``docs/architecture.md``'s copy of the list (word for word, when that file exists).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from meta.cycle.daemon import Daemon

ROOT = Path(__file__).resolve().parents[1]
CYCLE = ROOT / "meta" / "cycle"
DAEMON = CYCLE / "daemon.py"
STEP_LINE = re.compile(r"^(\d+)\. (\w+) \(``([^`]+)``\)")
STEP_DOC = re.compile(r"^Cycle step (\d+), (\w+): ")
STEP_MENTION = re.compile(r"\b[Ss]teps? (\d+) \((\w+)\)")
MAX_TOP_ENTRIES = 15  # meta/cycle/ is the numbered period, not a flat floor of modules

Step = tuple[int, str]


def _docstring_list() -> list[str]:
    """_docstring_list is the daemon docstring's numbered list, as written (continuation lines too)."""
    lines = (ast.get_docstring(ast.parse(DAEMON.read_text())) or "").splitlines()
    first = lines.index("One period, in order:") + 1
    last = next(i for i in range(first, len(lines)) if not lines[i].strip())
    return lines[first:last]


def _numbering() -> list[tuple[int, str, str]]:
    """_numbering is (number, name, module path) of each step the daemon's docstring lists."""
    return [(int(m[1]), m[2], m[3]) for line in _docstring_list() if (m := STEP_LINE.match(line))]


def _steps() -> list[Step]:
    return [(number, name) for number, name, _ in _numbering()]


def _first_doc_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.splitlines()[0] if doc else ""


def _module_file(path: str) -> Path:
    """_module_file is the file whose docstring names a step: a package's ``__init__.py``."""
    base = ROOT if path.startswith("meta/") else CYCLE
    return base / path / "__init__.py" if path.endswith("/") else base / path


def test_the_steps_are_numbered_one_to_n_each_name_once() -> None:
    steps = _steps()
    assert steps, "daemon.py's docstring lists no steps"
    assert [n for n, _ in steps] == list(range(1, len(steps) + 1)), steps
    assert len({name for _, name in steps}) == len(steps), steps
    # every numbered line of the list is a step line: no "3b." or unnumbered step slips in
    numbered = [line for line in _docstring_list() if re.match(r"^\d+\w*\.", line)]
    assert len(numbered) == len(steps), numbered


def test_period_calls_the_steps_in_the_docstrings_order() -> None:
    source = textwrap.dedent(inspect.getsource(Daemon.period))
    comments = [(int(m[1]), m[2]) for m in re.finditer(r"#\s*(\d+)\.\s*(\w+)\s*$", source, re.M)]
    assert comments == _steps()


@pytest.mark.parametrize(("number", "name", "path"), _numbering(), ids=lambda v: str(v))
def test_each_step_module_opens_with_its_number_and_name(number: int, name: str, path: str) -> None:
    module = _module_file(path)
    assert module.is_file(), f"step {number} ({name}): {path} is missing"
    if not path.startswith("meta/"):  # the pure policy (step 9) keeps its own wording
        assert _first_doc_line(module).startswith(f"Cycle step {number}, {name}: "), (
            f"{module.relative_to(ROOT)} should open with 'Cycle step {number}, {name}: '"
        )


def test_no_module_claims_a_step_the_list_does_not_give_it() -> None:
    listed = {_module_file(path).resolve(): (number, name) for number, name, path in _numbering()}
    steps = dict(_steps())
    for module in sorted(CYCLE.rglob("*.py")):
        text = module.read_text()
        if m := STEP_DOC.match(_first_doc_line(module)):
            # a step's own module, or the main module inside its package
            owner = listed.get(module.resolve()) or listed.get((module.parent / "__init__.py").resolve())
            assert owner == (int(m[1]), m[2]), f"{module.relative_to(ROOT)}: {m[0]}"
        for mention in STEP_MENTION.finditer(text):
            number, name = int(mention[1]), mention[2]
            if name in steps.values():
                assert steps.get(number) == name, f"{module.relative_to(ROOT)}: '{mention[0]}'"


def test_the_readme_draws_the_same_steps() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Architecture") :]
    section = section[: section.index("\n## ", 1)]
    drawn = [(int(m[1]), m[2]) for m in re.finditer(r"^\s+(\d+)\. (\w+) \(", section, re.M)]
    assert drawn == _steps()


def test_docs_architecture_copies_the_list_word_for_word() -> None:
    doc = ROOT / "docs" / "architecture.md"
    assert doc.exists(), "docs/architecture.md is the map of the period: it must be in the repository"
    m = re.search(r"<!-- period:[^\n]*-->\n```text\n(.*?)\n```\n<!-- /period -->", doc.read_text(), re.S)
    assert m, "docs/architecture.md has no <!-- period --> block"
    assert m[1].splitlines() == _docstring_list()


def test_meta_cycle_stays_a_short_list_at_the_top() -> None:
    entries = [p.name for p in CYCLE.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= MAX_TOP_ENTRIES, sorted(entries)
