"""``import mailroom`` and the ``mailroom`` command load only what they use: every public
name still imports (PEP 562), ``mailroom --version`` and ``mailroom status`` load neither
the protocols nor the runtime, and a missing extra is named with its install command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import mailroom
import mailroom.net
from mailroom.cli import PROTOCOLS, build_parser
from mailroom.core.extras import EXTRAS, MissingExtra, need

#: Modules the light paths must not load (the core, the protocols, the runtime, Spark).
HEAVY = (
    "asyncio",
    "mailroom.core",
    "mailroom.protocols",
    "mailroom.net.node",
    "mailroom.sim",
    "mailroom.spark",
    "mailroom.trace",
)


def _loaded(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_every_public_name_imports() -> None:
    for name in mailroom.__all__:
        assert getattr(mailroom, name) is not None, name
    for name in mailroom.net.__all__:
        assert getattr(mailroom.net, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from mailroom import *", namespace)
    assert set(mailroom.__all__) <= set(namespace)
    assert set(mailroom.__all__) <= set(dir(mailroom))
    assert "rst" in PROTOCOLS
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        _ = mailroom.Nonesuch  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "code",
    [
        "import mailroom",
        "import sys; from mailroom.cli import main; sys.argv = ['mailroom', 'status', '-h']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass",
        "from mailroom.cli import main; main(['status', '127.0.0.1:1'])",
    ],
)
def test_the_light_paths_load_no_heavy_module(code: str) -> None:
    loaded = _loaded(code)
    assert "mailroom" in loaded
    assert "attrs" not in loaded or "cli" in code  # (the CLI's own records are attrs classes)
    assert not [m for m in loaded for h in HEAVY if m == h or m.startswith(h + ".")]


def test_running_a_subcommand_loads_it() -> None:
    """The check the test above makes can fail: a command that runs loads its module."""
    loaded = _loaded("from mailroom.cli import main; main(['demo', '--protocol', 'rst'])")
    assert {"mailroom.protocols", "mailroom.sim"} <= loaded


def test_the_full_parser_knows_every_subcommand() -> None:
    parser = build_parser()
    args = parser.parse_args(["simulate", "--protocol", "RST", "-n", "3"])
    assert (args.command, args.protocol, args.processes) == ("simulate", "rst", 3)
    assert parser.parse_args(["status", "127.0.0.1:9"]).address == "127.0.0.1:9"


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"pip install 'mailroom\[viz\]'") as caught:
        need("matplotlib", "drawing a diagram")
    assert isinstance(caught.value, ImportError)  # fallbacks on ImportError still apply
    assert set(EXTRAS.values()) <= {"spark", "viz", "metrics", "nemesis"}


def test_help_texts_are_what_the_commands_print(capsys: pytest.CaptureFixture[str]) -> None:
    from mailroom.cli import help_texts, main

    texts = help_texts()
    assert list(texts) == ["", "demo", "simulate", "check", "sweep", "node", "status"]
    with pytest.raises(SystemExit):
        main(["status", "--help"])
    assert capsys.readouterr().out == texts["status"]


@pytest.mark.parametrize(("configure", "shown"), [("", False), ("logging.basicConfig()", True)])
def test_the_library_logs_only_where_the_application_says(configure: str, shown: bool) -> None:
    """The library adds a NullHandler and nothing else: a warning reaches stderr only
    once the application configures logging (Python's last-resort handler, which
    prints without a time, never shows it)."""
    code = (
        f"import logging, mailroom\n{configure}\n"
        "logging.getLogger('mailroom.net').warning('waiting for a majority')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ("waiting for a majority" in out.stderr) is shown
