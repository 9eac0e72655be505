"""`packcheck`: the command-line entry point; one subcommand per file in this package.

Exit status: 0 every supported case passes, 1 a case fails, 2 a usage or harness error.

Standard library only at the top: SIGINT and SIGTERM are caught (harness/cli/interrupt.py) before the commands are
imported and, for a command that launches engines, before the zygote of its launches imports torch (3 s); a signal
then is one line and exit 2, as later in a run. The parser imports no torch: `--version`, `--help` and `list` answer
in a fraction of a second (tests/test_cli_without_torch.py).
"""

from __future__ import annotations

import argparse
import sys
import traceback

from packcheck.harness.cli.interrupt import Interrupted, catch_signals, restore

USAGE_ERROR = 2


EPILOG = """\
examples:
  # every scenario on the reference trainer, llama only (HTML report in reports/latest)
  packcheck run --engine reference --family llama
  # your engine: class MyEngine in ./my_engine.py, at the most precise dtype its Capabilities declare (--dtype auto,
  # the default: float64 where it declares float64, float32 for an engine built on transformers)
  packcheck run --engine my_engine:MyEngine --family llama --out reports/mine
  # what a scenario compares, its tolerance per dtype, the bugs it is proven to catch
  packcheck explain microbatch_invariance
  # the HTML report against an earlier run, and a Markdown summary for a pull-request comment
  packcheck report reports/mine --baseline reports/main --markdown pr.md
  # the noise floor of float32 runs over 50 seeds, per tolerance field
  packcheck calibrate --engine reference --family llama --dtype float32 --seeds 0-49 --out reports/cal
  # where a failing verdict's two arms first part: the first divergent module (or: the loss)
  packcheck localise reports/mine/my_engine/llama/packed_vs_unpacked
  # the known bugs (mutants) the suite is proven to catch
  packcheck list mutants
  # a failing verdict shrunk to the smallest case that still fails the same way, and that case run again
  packcheck shrink reports/mine/my_engine/llama/packed_vs_unpacked
  packcheck replay reports/mine/shrunk/my_engine/llama/packed_vs_unpacked.json
  # every run's margins over the engine's commits or releases, the steps found and what changed (runs record with --history)
  packcheck history --store history.sqlite --out reports/history --markdown history.md
  # the attention and linear-attention kernels this machine has, against a float64 per-document oracle
  packcheck kernels --out reports/kernels

exit status:
  0  every supported case passes
  1  a case fails, errors or hangs
  2  a usage error (bad option, unknown name, an engine that does not start), every case
     unsupported, no absolute check passed for an engine and family (--relative-only
     accepts that), an interrupted run, or an internal error

`packcheck COMMAND --help` describes each command. Docs: README.md, docs/adapters.md, docs/report.md.
"""


def build_parser() -> argparse.ArgumentParser:
    from packcheck.harness.cli import (bisect_cmd, calibrate_cmd, explain_cmd, golden_cmd, history_cmd, kernels_cmd, list_cmd,
                                       localise_cmd, replay_cmd, report_cmd, run_cmd, shrink_cmd)

    parser = argparse.ArgumentParser(prog="packcheck", description="Conformance suite and numerics harness for packed LM training.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"packcheck {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (list_cmd, explain_cmd, run_cmd, localise_cmd, shrink_cmd, replay_cmd, calibrate_cmd, report_cmd, history_cmd, bisect_cmd,
                   golden_cmd, kernels_cmd):
        module.add_parser(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("packcheck")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    previous = catch_signals()  # before the commands (and torch) are imported
    try:
        try:
            args = build_parser().parse_args(argv)
            if getattr(args.handler, "launches", False):  # part of start-up: it imports torch (the parser does not)
                from packcheck.harness.launch.launch import prefork_zygote

                prefork_zygote()  # while this process has no thread and has run no torch operation
        except Interrupted as stop:
            command = argv[0] if argv and not argv[0].startswith("-") else ""
            print(f"packcheck{' ' + command if command else ''}: interrupted ({stop}) during start-up, before the first verdict; "
                  "nothing was started, nothing was judged", file=sys.stderr)
            return USAGE_ERROR
        if not getattr(args.handler, "catches_signals", False):
            restore(previous)  # the other commands keep Python's own Ctrl-C
        args.argv = argv
        return _dispatch(args)
    except Interrupted as stop:  # between `packcheck run`'s own handlers and these
        print(f"packcheck {args.command}: interrupted ({stop})", file=sys.stderr)
        return USAGE_ERROR
    finally:
        restore(previous)


def _dispatch(args) -> int:
    from packcheck.harness.contract import ContractError
    from packcheck.harness.errors import InputError

    try:
        return args.handler(args)
    except BrokenPipeError:  # output piped into `head`: not an error
        return 0
    except (InputError, ContractError, LookupError, OSError) as err:  # OSError: a file it cannot read or write, named
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"packcheck {args.command}: error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except Exception:  # noqa: BLE001 - a harness bug still ends with exit 2 and its traceback
        traceback.print_exc()
        print(f"packcheck {args.command}: internal error (a bug in packcheck, please report it)", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
