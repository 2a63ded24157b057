"""Does CI's compiled phase reach all the compiled code that the quick tier reaches?

CI runs the whole suite on the pure package, then the test files of
``tests/compiled_phase.txt`` against the compiled build: not the whole quick tier
again, since most of it never enters a compiled module. This script checks that the
choice loses nothing. It runs the quick tier once on the pure package (``.venv``),
recording which test reached each line (coverage.py's dynamic contexts). Then it
compares, for every module in ``setup.py``'s ``COMPILED``, the lines and arcs (jumps
from line to line, so every branch taken) that the whole tier reached with those the
phase's files reached. Code that runs when modules are imported counts for both: the
phase imports them too.

It prints one line per module and exits 0 if the phase reaches everything the tier
reaches. Otherwise it prints what only the tier reaches and the test files that reach it
(the files to add to the list), and exits 1.

    .venv/bin/python scripts/compiled_reach.py                 # 8 to 15 minutes on 2 cores
    .venv/bin/python scripts/compiled_reach.py --data FILE     # analyse a run kept before
    .venv/bin/python scripts/compiled_reach.py --keep FILE     # keep this run's data

Reaching the same lines and arcs is what coverage can tell. Two tests can take one path
with different values, so this is the measure CI's choice keeps equal, not a proof that
the other tests could not fail compiled.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile

import coverage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASE = os.path.join(ROOT, "tests", "compiled_phase.txt")


def compiled_modules() -> list[str]:
    """``setup.py``'s ``COMPILED`` (run as a module, its ``setup()`` does not run)."""
    return list(runpy.run_path(os.path.join(ROOT, "setup.py"))["COMPILED"])


def phase_files(path: str = PHASE) -> list[str]:
    """The test files ``tests/compiled_phase.txt`` names (its globs expanded), relative to
    the checkout; SystemExit naming a line that matches no file."""
    out: list[str] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            pattern = line.split("#", 1)[0].strip()
            if not pattern:
                continue
            found = sorted(glob.glob(os.path.join(ROOT, pattern)))
            if not found:
                raise SystemExit(f"{path}:{number}: {pattern!r} matches no file")
            out += [os.path.relpath(p, ROOT) for p in found]
    return out


def run_quick_tier(data_file: str) -> None:
    """The quick tier on the pure package, with branch coverage and each test's context."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="quick", COVERAGE_FILE=data_file)
    command = [
        os.path.join(ROOT, ".venv", "bin", "python"),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not slow and not nemesis",
        "-n",
        "2",
        "--dist",
        "loadfile",
        "--cov=mailroom",
        "--cov-branch",
        "--cov-context=test",
        "--cov-report=",
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the quick tier failed (exit {done.returncode}): fix it first")


def measured(data: coverage.CoverageData, module: str) -> str:
    """The measured file that is ``module`` (a path such as ``src/mailroom/core/codec.py``)."""
    tail = os.sep + module.split("src" + os.sep, 1)[-1]
    names = [f for f in data.measured_files() if f.endswith(tail)]
    if len(names) != 1:
        raise SystemExit(f"{module}: {len(names)} measured files match it")
    return names[0]


def test_file(context: str) -> str:
    """The test file of a context (``tests/test_x.py::test_y|run``)."""
    return context.split("::", 1)[0]


def compare(data_file: str, phase: str = PHASE) -> int:
    """Print the comparison of the run in ``data_file`` with the files ``phase`` lists;
    0 if the phase misses nothing."""
    data = coverage.CoverageData(basename=data_file)
    data.read()
    files = phase_files(phase)
    # the empty context is code run outside any test (imports, collection): both have it
    phase_query = ["^$"] + [f"^{re.escape(f)}::" for f in files]
    missing_lines = missing_arcs = 0
    adders: collections.Counter[str] = collections.Counter()
    print(f"the compiled phase: {len(files)} test files ({os.path.relpath(phase, ROOT)})")
    for module in compiled_modules():
        name = measured(data, module)
        data.set_query_contexts(None)
        lines, arcs = set(data.lines(name) or ()), set(data.arcs(name) or ())
        data.set_query_contexts(phase_query)
        phase_lines, phase_arcs = set(data.lines(name) or ()), set(data.arcs(name) or ())
        only_lines, only_arcs = lines - phase_lines, arcs - phase_arcs
        missing_lines += len(only_lines)
        missing_arcs += len(only_arcs)
        print(
            f"{module}: the quick tier reaches {len(lines)} lines and {len(arcs)} arcs; "
            f"the phase misses {len(only_lines)} lines and {len(only_arcs)} arcs"
        )
        if only_lines or only_arcs:
            data.set_query_contexts(None)
            by_line = data.contexts_by_lineno(name)
            starts = only_lines | {abs(a) for a, _ in only_arcs}
            arcs_text = ", ".join(f"{a}->{b}" for a, b in sorted(only_arcs))
            print(f"  only the quick tier reaches lines {sorted(only_lines)}, arcs [{arcs_text}]")
            candidates = {
                test_file(c) for line in starts for c in by_line.get(line, []) if "::" in c
            }
            for path in sorted(candidates.difference(files)):
                data.set_query_contexts([f"^{re.escape(path)}::"])
                hits = len(only_lines.intersection(data.lines(name) or ()))
                hits += len(only_arcs.intersection(data.arcs(name) or ()))
                if hits:
                    adders[path] += hits
    if missing_lines or missing_arcs:
        where = os.path.relpath(phase, ROOT)
        print(f"the phase misses {missing_lines} lines and {missing_arcs} arcs; the test files")
        print(f"that reach them (add to {where}), with how many of those lines and arcs:")
        for path, count in adders.most_common(10):
            print(f"  {path}: {count}")
        return 1
    print("the phase reaches every line and arc of the compiled modules the quick tier reaches")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="analyse this coverage data file, kept from a run")
    p.add_argument("--keep", help="keep this run's coverage data in this file")
    p.add_argument("--phase", default=PHASE, help="the list of the phase's test files")
    args = p.parse_args(argv)
    for option in ("data", "phase"):
        path = getattr(args, option)
        if path is not None and not os.path.isfile(path):
            p.error(f"--{option} {path}: no such file")
    if args.data:
        return compare(args.data, args.phase)
    with tempfile.TemporaryDirectory() as tmp:
        data_file = os.path.join(tmp, "coverage")
        run_quick_tier(data_file)  # pytest-cov combines its workers' data into data_file
        if args.keep:
            shutil.copyfile(data_file, args.keep)
        return compare(data_file, args.phase)


if __name__ == "__main__":
    sys.exit(main())
