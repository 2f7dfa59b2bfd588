"""The ``rewardkit`` command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from rewardkit.cli import audit as cli_audit
from rewardkit.cli import build as cli_build
from rewardkit.cli import calibrate as cli_calibrate
from rewardkit.cli import config as cli_config
from rewardkit.cli import env as cli_env
from rewardkit.cli import eval as cli_eval
from rewardkit.cli import lint as cli_lint
from rewardkit.cli import real_model as cli_real_model
from rewardkit.cli import recipe as cli_recipe
from rewardkit.cli import synth as cli_synth
from rewardkit.cli import tasks as cli_tasks
from rewardkit.cli import tiny_model as cli_tiny_model
from rewardkit.cli import view as cli_view
from rewardkit.errors import UserError
from rewardkit.recipes import EXAMPLES

# Ships with the package, so `rewardkit demo` works from any directory.
DEFAULT_DEMO = EXAMPLES / "completions.jsonl"

# The options that name input files, to say which input a RecursionError or UnicodeDecodeError came from.
_INPUT_OPTIONS = ("data", "actions", "db", "input", "tasks_file", "split_file", "policy_file", "prompt")


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def _one_line(text: str, limit: int = 1000) -> str:
    # splitlines() also breaks on \r, \v, \f, \x1c-\x1e, \x85, U+2028/9: join on all of them.
    line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line too (argparse prints the usage block first); subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {_one_line(message)} (see {self.prog} --help)\n")


def cmd_rewards(args: argparse.Namespace) -> int:
    from rewardkit.rewards import REWARDS, register

    # Importing registers nothing. Registering proves that ms-swift is importable and takes every key
    # (register() raises on a key another plugin already holds), so the list is what `swift rlhf` will find.
    register()
    width = max(map(len, REWARDS))
    for key, cls in REWARDS.items():
        print(f"{key:<{width}}  {cls.__name__:<18} {_first_line(cls.__doc__)}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from rewardkit.files.jsonl import read_rows
    from rewardkit.rewards import REWARDS, MissingColumnError
    from rewardkit.runs.stats.scoring import score_rows

    path = Path(args.data)
    rows = read_rows(path, "--data", required=("completion",))
    try:
        table = score_rows(rows)
    except MissingColumnError as exc:  # the reward names the column; the user needs the file too
        raise MissingColumnError(f"{path}: {exc}") from exc
    view = Table(title=f"planning rewards on {escape(str(path))}", show_footer=True)
    view.add_column("completion", footer="mean")
    means = table.means()
    for key, mean, weight in zip(table.keys, means, table.weights, strict=True):
        view.add_column(f"{REWARDS[key].__name__}\n×{weight:g}", justify="right", footer=f"{mean:.3f}")
    view.add_column("weighted", justify="right", footer=f"{table.mean_total():.3f}")
    for i, name in enumerate(table.names):
        cells = ["—" if s is None else f"{s:.3f}" for s in table.scores[i]]
        # Text, not markup: a row named "[/x]" is data. Lone surrogates (valid JSON escapes) cannot be printed.
        label = Text(name.encode("utf-8", "replace").decode("utf-8"))
        view.add_row(label, *cells, f"{table.total(i):.3f}")
    Console(width=max(160, Console().width)).print(view)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rewardkit", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show the traceback of a user error")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("rewards", help="list the registered reward keys")
    p.set_defaults(func=cmd_rewards)
    for name, helptext in (("score", "score a JSONL of completions"), ("demo", "score the bundled examples")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--data", default=str(DEFAULT_DEMO), help="JSONL with completion, solution, experts")
        p.set_defaults(func=cmd_score)
    # Each module adds its subcommands, in help order.
    modules = (
        cli_build,
        cli_recipe,
        cli_tiny_model,
        cli_real_model,
        cli_env,
        cli_tasks,
        cli_synth,
        cli_eval,
        cli_view,
        cli_audit,
        cli_config,
        cli_lint,
        cli_calibrate,
    )
    for module in modules:
        module.add_parsers(sub)
    return parser


def _is_a(exc: BaseException, module: str, name: str) -> bool:
    cls = getattr(sys.modules.get(module), name, None)
    return isinstance(cls, type) and isinstance(exc, cls)


def _inputs(args: argparse.Namespace) -> str:
    names = [str(v) for o in _INPUT_OPTIONS for v in _as_list(getattr(args, o, None))]
    if os.environ.get("REWARDKIT_CONFIG"):
        names.append(f"$REWARDKIT_CONFIG={os.environ['REWARDKIT_CONFIG']}")
    return f" (reading {', '.join(names)})" if names else ""


def _as_list(value: object) -> list[object]:
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def user_error(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The message for an exception that is the user's input at fault; None for anything else (a bug)."""
    if isinstance(exc, OSError):
        if exc.filename is None:
            return str(exc) or type(exc).__name__
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else str(exc.filename)
        return f"{where}: {exc.strerror or type(exc).__name__}"
    if isinstance(exc, RecursionError):
        return f"input nested too deep to read{_inputs(args)}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start}){_inputs(args)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc}){_inputs(args)}"
    if _is_a(exc, "yaml.error", "YAMLError"):
        return f"not valid YAML ({exc}){_inputs(args)}"
    if isinstance(exc, UserError):
        return str(exc) or type(exc).__name__
    return None


def _command(args: argparse.Namespace) -> str:
    sub = getattr(args, "action", None) or getattr(args, "builder", None)
    return f"{args.command} {sub}" if sub else args.command


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: it stops a run on the same path as Ctrl-C (exit 143, not 130)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` while a command runs (main thread only; the old handler comes back)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _notes(exc: BaseException) -> str:
    """What a run added on its way out (``--resume`` hint), as a tail for the one line."""
    return "".join(f"; {note}" for note in getattr(exc, "__notes__", ()))


def _quiet_stdout() -> None:
    """Stdout's reader went away (``| head``): send what is left to /dev/null, so exiting cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _flushed(code: int) -> int:
    sys.stdout.flush()  # here, not at exit: a closed pipe is then a BrokenPipeError that main can handle
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. A user error is one line and exit 2; Ctrl-C exits 130 and SIGTERM 143, with one line
    (a run's ``--resume`` hint included); a closed stdout (``rewardkit rewards | head -1``) exits 141 quietly,
    as a process killed by SIGPIPE does."""
    args = build_parser().parse_args(argv)
    try:
        with _sigterm_stops():
            if args.debug:
                return _flushed(int(args.func(args)))
            try:
                return _flushed(int(args.func(args)))
            except Exception as exc:
                message = user_error(exc, args)
                if message is None or isinstance(exc, BrokenPipeError):
                    raise  # a bug in rewardkit: the traceback is what a report needs
                print(f"rewardkit {_command(args)}: {_one_line(message + _notes(exc))}", file=sys.stderr)
                return 2
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except KeyboardInterrupt as exc:
        why = "stopped by SIGTERM" if isinstance(exc, Terminated) else "interrupted"
        print(f"rewardkit {_command(args)}: {_one_line(why + _notes(exc))}", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
