"""``rewardkit lint reward FILE.py:NAME --data ROWS.jsonl``: the reward contract kit on your own reward and rows.

``NAME`` is a function or a class in ``FILE.py``; a class is instantiated with no arguments. Each row of
``ROWS.jsonl`` holds the dataset columns the reward reads plus ``completion``, a gold completion (one that should
score well). :func:`rewardkit.testing.check_reward` runs every check; its report is what is printed and written.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from rewardkit.errors import UserError
from rewardkit.files.jsonl import read_rows
from rewardkit.testing import check_reward
from rewardkit.testing.calling import DeclarationError
from rewardkit.testing.hostile import bounded, describe
from rewardkit.testing.kit import CHECK_TIME_S


class RewardSpecError(UserError, ValueError):
    """``FILE.py:NAME`` names no reward (a usage error: exit 2)."""


def split_spec(spec: str) -> tuple[Path, str]:
    """``FILE.py:NAME`` -> (FILE.py, NAME); the last colon splits, so a Windows drive letter survives."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise RewardSpecError(f"{spec!r}: expected FILE.py:NAME (a function or class in FILE.py)")
    return Path(path), name


def _exec(path: Path, spec: str) -> Any:
    """``path`` imported as a module of its own; whatever goes wrong is a :class:`RewardSpecError`."""
    module_name = f"_rewardkit_lint_{abs(hash(str(path.resolve())))}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None or loader.loader is None:
        raise RewardSpecError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(loader)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # the file may import its neighbours
    try:
        loader.loader.exec_module(module)
    except SyntaxError as exc:
        raise RewardSpecError(f"{path}:{exc.lineno}: {exc.msg}") from exc
    except ImportError as exc:
        hint = " (a relative import: FILE.py is loaded on its own, so import its neighbours by name)"
        relative = "relative import" in str(exc) or "no known parent package" in str(exc)
        raise RewardSpecError(f"{path}: importing it raised {describe(exc)}{hint if relative else ''}") from exc
    except (Exception, SystemExit) as exc:  # SystemExit too: a file that exits at import names no reward
        raise RewardSpecError(f"{path}: importing it raised {describe(exc)}") from exc
    finally:
        sys.path.remove(folder)
    return module


def load_reward(spec: str) -> Any:
    """The reward ``FILE.py:NAME`` names: the function, or an instance of the class built with no arguments."""
    path, name = split_spec(spec)
    if not path.is_file():
        raise RewardSpecError(f"{path}: not found (from {spec!r})")
    module = _exec(path, spec)
    if not hasattr(module, name):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RewardSpecError(f"{path}: no {name!r}; callables there: {', '.join(found) or 'none'}")
    obj = getattr(module, name)
    if isinstance(obj, type):
        try:
            return obj()
        except TypeError as exc:
            raise RewardSpecError(f"{spec}: the class cannot be built with no arguments ({exc})") from exc
        except (Exception, SystemExit) as exc:
            raise RewardSpecError(f"{spec}: building it with no arguments raised {describe(exc)}") from exc
    if not callable(obj):
        raise RewardSpecError(f"{spec}: is a {type(obj).__name__}, not a function or class")
    return obj


def _load_problem(spec: str) -> str | None:
    try:
        load_reward(spec)
    except RewardSpecError as exc:
        return str(exc)
    return None


def load_bounded(spec: str, limit_s: float) -> Any:
    """:func:`load_reward`, tried first in a forked child bounded by ``limit_s``, so that a file that hangs, exits
    or is killed at import (or in its class's ``__init__``) is a one-line usage error, not a hung or ended lint."""
    outcome = bounded(lambda: _load_problem(spec), limit_s)
    if outcome.status == "ok" and outcome.value is not None:
        raise RewardSpecError(outcome.value)
    if outcome.status == "timeout":
        raise RewardSpecError(f"{spec}: importing and building it did not finish within {limit_s:g} s")
    if outcome.status != "ok":
        raise RewardSpecError(f"{spec}: importing and building it {outcome.status}: {outcome.value}")
    return load_reward(spec)


def lint_reward(spec: str, data: str | Path, **options: Any) -> Any:
    """The kit's :class:`~rewardkit.testing.Report` for the reward ``spec`` on the rows of ``data``; ``options`` are
    :func:`~rewardkit.testing.check_reward`'s (``margin``, ``time_limit_s``, ``skip``, ``isolate``, ``draws``,
    ``check_time_s``)."""
    limit = options.get("check_time_s", CHECK_TIME_S)
    reward = load_bounded(spec, limit) if options.get("isolate", True) else load_reward(spec)
    rows = read_rows(data, "--data", required=("completion",))
    try:
        return check_reward(reward, rows, **options)
    except DeclarationError as exc:
        raise RewardSpecError(f"{spec}: {exc}") from exc
