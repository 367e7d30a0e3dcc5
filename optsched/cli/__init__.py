"""Command-line interface: ``optsched <subcommand> ...``, one module per subcommand.

* ``fit``     (:mod:`.fit`) fit the 7-parameter iteration-time model to a placements CSV and write its JSON;
* ``predict`` (:mod:`.predict`) predict the iteration time of every row of a placements CSV with a params JSON;
* ``curves``  (:mod:`.curves`) print a model's GPU or CPU sensitivity curve on a built-in cluster;
* ``solve``   (:mod:`.solve`) solve a round file (``docs/rounds.md``) and print the decision as JSON;
* ``gen-round`` (:mod:`.gen_round`) write a random but realistic round file, flags from the kinds' generators;
* ``gap``     (:mod:`.gap`) measure the heuristic's and the exact solver's gap on round files;
* ``simulate`` (:mod:`.simulate`) replay a trace (or the built-in synthetic one) under several policies and
  compare them;
* ``serve``   (:mod:`.serve`) answer rounds over HTTP (:mod:`optsched.service`; extra ``serve``);
* ``slurm-agent`` (:mod:`.slurm_agent`) read a Slurm cluster, solve its rounds and apply the decisions.

Every :class:`~optsched.core.errors.OptschedError` and every usage error ends with one line
``optsched: error: <message>`` on stderr and exit code 2, never a traceback. Results go to stdout
(this package is the only place in optsched that writes there, through :func:`.common.out`);
progress goes to the ``optsched.cli`` logger (``-v`` shows it).

A subcommand's module is imported, and its options added, only when that subcommand is parsed or
its help shown: ``optsched --help`` and each command import no other command's layers.

Adding a subcommand: write ``optsched/cli/<name>.py`` with ``add_arguments(parser)`` (its description
and options) and ``run(args) -> int``, and add ``(name, one-line help)`` to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from typing import Any

from optsched import __version__
from optsched.cli.common import PROG, err, one_line
from optsched.core.checks import require_seed
from optsched.core.errors import OptschedError

#: the subcommands in the order ``--help`` lists them, with their one-line help; the module of
#: ``name`` is ``optsched.cli.<name with - as _>``
COMMANDS: tuple[tuple[str, str], ...] = (
    ("fit", "fit the iteration-time model to measured rows"),
    ("predict", "predict iteration times of plans on placements"),
    ("curves", "print a model's GPU or CPU sensitivity curve"),
    ("solve", "solve a scheduling round file and print the decision as JSON"),
    ("gen-round", "write a random but realistic round file"),
    ("gap", "measure how far the heuristic is from the exact optimum on round files"),
    ("simulate", "replay a trace under several policies and compare them"),
    ("serve", "answer rounds over HTTP (POST /solve)"),
    ("slurm-agent", "drive a Slurm cluster: read its queue, solve rounds, apply the decisions"),
)

__all__ = ["COMMANDS", "build_parser", "main", "sample_rows"]


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Raise on usage errors instead of exiting, so :func:`main` reports them like any other."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(self.format_usage(), message)


class _CommandParser(_Parser):
    """A subcommand's parser: its module is imported and its options added on first use (parsing,
    usage or help), so that building the whole parser imports no command's layers."""

    def __init__(self, *args: Any, command: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._command: str | None = command

    def _complete(self) -> None:
        if self._command is None:
            return
        module = importlib.import_module(f"{__name__}.{self._command.replace('-', '_')}")
        self._command = None
        module.add_arguments(self)
        self.set_defaults(handler=module.run)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()

    def format_help(self) -> str:
        self._complete()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    """The ``optsched`` parser; each subcommand's options are added when it is first used."""
    parser = _Parser(prog=PROG, description="Optimization engine for deep-learning GPU-cluster scheduling.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO) to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser)
    for name, text in COMMANDS:
        sub.add_parser(name, help=text, command=name)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``optsched`` with ``argv`` (default: the process's arguments); the exit code. ``args.started`` is
    when the call began (a ``time.perf_counter()`` reading, before the subcommand's layers are imported): the
    clock of ``solve --time-limit`` (issue 26: importing the solve path took 0.8 s outside the limit)."""
    started = time.perf_counter()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        usage, message = exc.args
        err(usage.rstrip("\n"))
        err(f"{PROG}: error: {one_line(message)}")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    args.started = started
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("optsched")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        if getattr(args, "seed", None) is not None:  # every command's --seed feeds CP-SAT or numpy
            require_seed("--seed", args.seed)
        return int(args.handler(args))
    except OptschedError as exc:
        err(f"{PROG}: error: {one_line(str(exc))}")
        return 2
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def console_main() -> None:
    """The ``optsched`` command: :func:`main`, then the process ends at once with its exit code, its output
    flushed, without the interpreter's teardown (freeing every object of a large round and the solver
    libraries: 0.24 s after a 2,000-job solve, past ``--time-limit``; issue 26). Every file the commands
    write is closed before :func:`main` returns."""
    import os

    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def __getattr__(name: str) -> Any:
    """``sample_rows`` (of :mod:`.fit`) without importing ``fit``'s layers with the package."""
    if name == "sample_rows":
        from optsched.cli.fit import sample_rows
        return sample_rows
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
