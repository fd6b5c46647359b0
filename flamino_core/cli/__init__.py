"""The ``flamino`` command line: the same core functions as the app, for scripts and batch work.

One module per command family, each declaring its subcommands' arguments (``add_parsers``) and
running them (``cmd_*``); ``build_parser`` below assembles them, and ``main`` maps every failure
to an exit status and one line on stderr. Each command imports the heavy modules it needs (JAX,
Ray) only when it runs: ``flamino --help`` loads neither (``tests/integration/test_imports.py``). A command
module is itself imported only when its parser is built, and ``main`` builds the named command's
alone: ``flamino embed`` neither imports nor builds the other nine (40 ms of CPU of a one-protein
start, docs/benchmarks.md "The start of a one-protein embed").

Adding a command: a module here with ``add_parsers(sub)`` and its ``cmd_*``, its name in
``COMMAND_MODULES`` and each command it declares in ``COMMANDS`` (``tests/integration/test_cli_commands.py`` checks
that the two agree).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Sequence

from flamino_core import settings
from flamino_core.progress import say
from flamino_core.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UserError

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "UserError", "build_parser", "main", "run"]

# Modules of flamino_core.cli, in the order `flamino --help` lists their commands.
COMMAND_MODULES = ("models", "embed", "score", "variants", "predict", "suggest", "campaign", "contacts", "fold",
                   "batch_jobs")
# Each command and the module that declares it.
COMMANDS = {"fetch": "models", "convert": "models", "models": "models",
            "embed": "embed", "score": "score", "variants": "variants",
            "dms": "variants", "fit": "predict", "predict": "predict", "suggest": "suggest",
            "campaign": "campaign", "contacts": "contacts", "fold": "fold", "batch": "batch_jobs"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or only ``command``'s module's when it names
    one (the same parser for that command's arguments, its help and its errors)."""
    parser = argparse.ArgumentParser(
        prog="flamino", description="ESM-2 embeddings and variant scores (JAX / Flax NNX)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(f"flamino_core.cli.{name}").add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse already printed its usage message
        return EXIT_USAGE if exit_.code else EXIT_OK
    try:
        return args.call(args)
    except UserError as err:
        say(str(err))
        return EXIT_USAGE
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except MemoryError:
        say("out of memory: try fewer or shorter sequences, or a smaller model")
        return EXIT_FAILURE
    except OSError as err:  # an output folder without write permission, a full disk
        where = f" {err.filename}" if err.filename else ""
        say(f"could not write{where}: {err.strerror or err}")
        return EXIT_FAILURE
    except Exception as err:  # a bug or a dropped download: one line, the traceback on request
        if settings.DEBUG.get():
            traceback.print_exc()
        say(f"unexpected error: {type(err).__name__}: {err} (set FLAMINO_DEBUG=1 to see where; please report it)")
        return EXIT_FAILURE


def run() -> None:
    """The ``flamino`` command: ``main``, then the process ends without the interpreter's teardown.

    Every command has written, closed and renamed its outputs when ``main`` returns. What the
    teardown would still do changes nothing on disk but took 0.3-0.5 s of a one-protein
    ``flamino embed`` (JAX destroying its CPU client and joining its thread pools, Python
    freeing every module): a third of what the command took beyond importing JAX. A command
    that ran Ray (``flamino batch``) exits normally, so that Ray's exit handlers run.
    """
    code = main()
    if "ray" in sys.modules:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
