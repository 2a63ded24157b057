"""scripts/compiled_reach.py: the check that CI's compiled phase (tests/compiled_phase.txt)
reaches every line and arc of the compiled modules that the quick tier reaches, on
coverage data written here test by test (the script's own run of the quick tier is what
CONTRIBUTING.md tells a contributor to run, several minutes)."""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import coverage
import pytest

ROOT = Path(__file__).resolve().parent.parent


# the script's functions (runpy runs it as a module, not as main)
reach: Any = SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "compiled_reach.py")))

# a real test file in the phase and one that is not: the phase's globs match real files
IN_PHASE = "tests/test_codec.py"
OUTSIDE = "tests/test_cli.py"


def _run(tmp_path: Path, by_context: dict[str, dict[str, list[tuple[int, int]]]]) -> str:
    """A coverage data file (branch mode) with ``by_context``'s arcs, per context and
    compiled module (``core/codec.py``); every other compiled module imported only."""
    data_file = str(tmp_path / "coverage")
    data = coverage.CoverageData(basename=data_file)
    site = tmp_path / "site"
    modules = [m.split("src" + os.sep, 1)[-1] for m in reach.compiled_modules()]
    data.set_context("")
    data.add_arcs({str(site / m): [(-1, 1), (1, -1)] for m in modules})
    for context, arcs in by_context.items():
        data.set_context(context)
        data.add_arcs({str(site / "mailroom" / m): a for m, a in arcs.items()})
    data.write()
    return data_file


def _phase(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "phase.txt"
    path.write_text("# the phase\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_the_list_names_real_test_files_and_setup_py_its_modules() -> None:
    files = reach.phase_files()
    assert len(files) >= 50 and all((ROOT / f).is_file() for f in files)
    assert IN_PHASE in files and OUTSIDE not in files
    assert "src/mailroom/core/codec.py" in reach.compiled_modules()


def test_a_phase_that_reaches_what_the_tier_reaches_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run(
        tmp_path,
        {
            f"{IN_PHASE}::test_one|run": {"core/codec.py": [(-1, 2), (2, 3), (3, -1)]},
            f"{OUTSIDE}::test_two|run": {"core/codec.py": [(-1, 2), (2, -1)]},
        },
    )
    assert reach.compare(data, _phase(tmp_path, IN_PHASE)) == 1  # (2, -1): the tier's alone
    capsys.readouterr()
    assert reach.compare(data, _phase(tmp_path, IN_PHASE, OUTSIDE)) == 0
    assert "reaches every line and arc" in capsys.readouterr().out


def test_a_line_only_another_file_reaches_is_named_with_that_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _run(
        tmp_path,
        {
            f"{IN_PHASE}::test_one|run": {"core/codec.py": [(-1, 2), (2, -1)]},
            f"{OUTSIDE}::test_two|run": {"core/codec.py": [(-1, 2), (2, 7), (7, -1)]},
        },
    )
    assert reach.compare(data, _phase(tmp_path, "tests/test_codec*.py")) == 1
    out = capsys.readouterr().out
    assert (
        "src/mailroom/core/codec.py: the quick tier reaches 3 lines and 6 arcs; "
        "the phase misses 1 lines and 2 arcs"
    ) in out
    assert "only the quick tier reaches lines [7], arcs [2->7, 7->-1]" in out
    assert f"  {OUTSIDE}: 3" in out and f"  {IN_PHASE}:" not in out  # only files to add


def test_a_pattern_that_matches_nothing_is_named(tmp_path: Path) -> None:
    phase = _phase(tmp_path, IN_PHASE, "tests/test_nothing_*.py  # a file since removed")
    with pytest.raises(SystemExit, match=r"phase.txt:3: 'tests/test_nothing_\*.py' matches no"):
        reach.phase_files(phase)
