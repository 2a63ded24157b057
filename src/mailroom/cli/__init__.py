"""The ``mailroom`` command: demo, simulate, check, sweep, node, status.

A subcommand's module is imported only when that subcommand runs (``mailroom
--version`` and ``mailroom status`` do not load the simulator, the checkers or the
runtime); ``build_parser()`` builds every subcommand's full parser."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from mailroom import __version__
from mailroom._build import BUILD
from mailroom.cli.options import COMMAND_HELP, add_command

if TYPE_CHECKING:
    from mailroom.sim.registry import PROTOCOLS

__all__ = ["PROTOCOLS", "build_parser", "help_texts", "main"]


@attrs.frozen
class _Command:
    """A subcommand: what adds its parser and what runs it."""

    add: Callable[[Any], object]
    run: Callable[[argparse.Namespace], int]


def _demo() -> _Command:
    from mailroom.cli.demo import RUNS, introduce, run_demo
    from mailroom.cli.demo_group import GROUP_RUNS, run_group_demo
    from mailroom.cli.demo_total import TOTAL_RUNS, run_total_demo

    everything = [*RUNS, *TOTAL_RUNS, *GROUP_RUNS]

    def add(sub: Any) -> None:
        demo = add_command(
            sub,
            "demo",
            help=COMMAND_HELP["demo"],
            description="Alice, Bob and Carol exchange three messages on a network that "
            "reorders them; each step shows the clocks and what waits in the mail room. "
            "The story is told in docs/story.md.",
        )
        demo.add_argument(
            "--protocol",
            type=str.lower,
            choices=[*everything, "all"],
            default="all",
            help="which protocol to show (default: all)",
        )

    def run(args: argparse.Namespace) -> int:
        chosen = everything if args.protocol == "all" else [args.protocol]
        introduce(sys.stdout)
        run_demo(sys.stdout, [p for p in chosen if p in RUNS])
        run_total_demo(sys.stdout, [p for p in chosen if p in TOTAL_RUNS])
        run_group_demo(sys.stdout, chosen)
        return 0

    return _Command(add, run)


def _simulate() -> _Command:
    from mailroom.cli.simulate import add_simulate_parser, run_simulate

    return _Command(add_simulate_parser, lambda args: run_simulate(args, args.subparser))


def _check() -> _Command:
    from mailroom.cli.check import add_check_parser, run_check

    return _Command(add_check_parser, lambda args: run_check(args, args.subparser))


def _sweep() -> _Command:
    from mailroom.cli.sweep import add_sweep_parser, run_sweep_cli

    return _Command(add_sweep_parser, run_sweep_cli)


def _node() -> _Command:
    from mailroom.cli.status import add_node_parser, run_node

    return _Command(add_node_parser, run_node)


def _status() -> _Command:
    from mailroom.cli.status import add_status_parser, run_status

    return _Command(add_status_parser, run_status)


#: The subcommands, in the order ``mailroom --help`` lists them.
COMMANDS: dict[str, Callable[[], _Command]] = {
    "demo": _demo,
    "simulate": _simulate,
    "check": _check,
    "sweep": _sweep,
    "node": _node,
    "status": _status,
}


def _build(commands: Collection[str] | None) -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(
        prog="mailroom",
        description="Ordered message delivery: FIFO, causal and total order.",
    )
    parser.add_argument("--version", action="version", version=f"mailroom {__version__} ({BUILD})")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, load in COMMANDS.items():
        if commands is None or name in commands:
            load().add(sub)
        else:
            sub.add_parser(name, help=COMMAND_HELP[name])
    return parser, sub


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``mailroom`` parser; ``commands``: the subcommands to build in full (None:
    all); the others are listed with their one-line help only."""
    return _build(commands)[0]


def help_texts() -> dict[str, str]:
    """What ``mailroom --help`` (key ``""``) and each ``mailroom COMMAND --help`` print
    (the CLI reference of the docs is made of them)."""
    parser, sub = _build(None)
    texts = {"": parser.format_help()}
    texts.update((name, command.format_help()) for name, command in sub.choices.items())
    return texts


def _named(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first word not an option), if it is one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    name = _named(words)
    parser = build_parser([] if name is None else [name])
    args = parser.parse_args(words)
    return COMMANDS[args.command]().run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; a closed pipe (``mailroom demo | head``) or Ctrl-C ends it quietly."""
    try:
        return _run(argv)
    except BrokenPipeError:
        # the reader went away: silence the flush at exit, as a shell tool would
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("mailroom: interrupted", file=sys.stderr)
        return 130


def __getattr__(name: str) -> Any:
    """``PROTOCOLS`` (the simulator's protocols), imported on first use."""
    if name == "PROTOCOLS":
        from mailroom.sim.registry import PROTOCOLS

        return PROTOCOLS
    raise AttributeError(f"module 'mailroom.cli' has no attribute {name!r}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
