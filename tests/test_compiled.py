"""The two builds (docs/compiled.md): ``mailroom.compiled`` says which one runs, and the
build script (``setup.py``, ``build_backend/``) compiles only when asked and falls back
to the pure package, in one line, when it cannot compile."""

from __future__ import annotations

import importlib.util
import os
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

import mailroom

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def setup_py() -> Any:
    return _load("mailroom_setup_py", ROOT / "setup.py")  # (its setup() runs only as main)


def test_compiled_says_which_build_runs() -> None:
    # scripts/test-compiled sets MAILROOM_EXPECT_COMPILED=1; the editable install is pure
    expected = os.environ.get("MAILROOM_EXPECT_COMPILED") == "1"
    assert type(mailroom.compiled) is bool and mailroom.compiled is expected
    codec = sys.modules.get("mailroom.core.codec") or importlib.import_module("mailroom.core.codec")
    assert (Path(codec.__file__ or "").suffix == ".so") is expected


def test_the_compiled_list_names_modules_of_the_package(setup_py: Any) -> None:
    compiled = setup_py.COMPILED
    assert compiled[0] == "src/mailroom/_build.py"  # the flag is compiled with the rest
    assert len(set(compiled)) == len(compiled)
    for path in compiled:
        assert path.startswith("src/mailroom/") and (ROOT / path).is_file()


def test_nothing_is_compiled_unless_asked(
    setup_py: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert setup_py.ext_modules({}, ["bdist_wheel"]) == []
    assert setup_py.ext_modules({"MAILROOM_COMPILE": "0"}, ["bdist_wheel"]) == []
    # the backend's runs for the requirements and the metadata compile nothing
    assert setup_py.ext_modules({"MAILROOM_COMPILE": "1"}, ["egg_info"]) == []
    assert setup_py.ext_modules({"MAILROOM_COMPILE": "1"}, ["dist_info"]) == []
    assert capsys.readouterr() == ("", "")


def test_without_mypyc_the_build_is_pure_and_says_so_in_one_line(
    setup_py: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mypyc.build", None)  # import mypyc.build fails
    assert setup_py.ext_modules({"MAILROOM_COMPILE": "1"}, ["bdist_wheel"]) == []
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("mailroom build: not compiled (mypyc is not installed)")
    assert err.rstrip().endswith("installing the pure-Python package")


def test_a_module_mypyc_refuses_leaves_the_build_pure_in_one_line(
    setup_py: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(paths: list[str], **options: object) -> list[object]:
        print("src/mailroom/x.py:3: error: Unsupported feature")  # as mypyc reports
        print("src/mailroom/x.py:9: error: Another")
        raise SystemExit(1)

    fake = types.ModuleType("mypyc.build")
    fake.mypycify = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mypyc.build", fake)
    assert setup_py.ext_modules({"MAILROOM_COMPILE": "1"}, ["bdist_wheel"]) == []
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "mypyc: src/mailroom/x.py:3: error: Unsupported feature" in err


def test_a_failed_c_build_removes_what_it_built_and_says_so(
    setup_py: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from setuptools import Distribution, Extension

    monkeypatch.chdir(tmp_path)
    dist = Distribution({"name": "x", "ext_modules": [Extension("x_missing", ["missing.c"])]})
    command = setup_py.BuildExtOrPure(dist)
    command.build_lib = str(tmp_path / "lib")
    command.build_temp = str(tmp_path / "temp")
    command.ensure_finalized()
    command.run()  # the source is missing: setuptools refuses, the command does not
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not compiled (the C compiler failed:" in err
    assert not (tmp_path / "lib").exists() or not any((tmp_path / "lib").iterdir())


def test_the_backend_asks_for_mypy_only_for_the_compiled_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = _load("mailroom_backend_test", ROOT / "build_backend" / "mailroom_backend.py")
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("MAILROOM_COMPILE", raising=False)
    monkeypatch.setattr(sys, "argv", [sys.argv[0]])
    pure = backend.get_requires_for_build_wheel()
    assert not any(r.startswith("mypy") for r in pure)
    monkeypatch.setenv("MAILROOM_COMPILE", "1")
    compiled = backend.get_requires_for_build_wheel()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "attrs>=23.1" in dependencies  # mypyc needs attrs to build the attrs classes
    assert compiled == [*pure, backend.MYPY, *dependencies]


def test_the_benchmark_refuses_an_interpreter_of_the_other_build() -> None:
    bench = _load("compiled_benchmark", ROOT / "benchmarks" / "compiled.py")
    if mailroom.compiled:  # this interpreter is the compiled build: the row runs
        assert bench.timed(sys.executable, "frames", pure=False) > 0
    else:  # the pure package named as the compiled build: refused before timing
        with pytest.raises(SystemExit, match="is not the compiled build"):
            bench.timed(sys.executable, "frames", pure=False)
