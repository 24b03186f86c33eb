"""The `quickmoe` command: `main` parses (cli/parser.py) and runs one subcommand (cli/commands.py,
cli/bench_commands.py) with the shared engine options of cli/args.py.

Subcommands import their heavy dependencies lazily so `quickmoe --help` answers at once; before they do, the
bytecode cache (startup/bytecode_cache.py) gives Python compiled bytecode where the installation has none. Bad input
raises a `QuickMoEError`, printed as one line without a traceback (exit status 2).
"""

from __future__ import annotations

import logging
import sys

from quickmoe.cli.args import (
    _engine_options,
    _parallel_flags,
    checked_inputs,
    parse_bytes,
)
from quickmoe.cli.parser import build_parser
from quickmoe.errors import QuickMoEError
from quickmoe.startup.bytecode_cache import enable_bytecode_cache

__all__ = ["_engine_options", "_parallel_flags", "build_parser", "checked_inputs", "main", "parse_bytes",
           "setup_logging"]

logger = logging.getLogger("quickmoe")


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose, args.quiet)
    try:
        enable_bytecode_cache()  # before torch is imported: compiled bytecode where the image ships none
        return args.func(args)
    except QuickMoEError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
