"""``rewardkit lint reward FILE.py:NAME --data ROWS.jsonl``: the reward contract kit on your own reward and rows.

``NAME`` is a function or a class in ``FILE.py``; a class is instantiated with no arguments. Each row of
``ROWS.jsonl`` holds the dataset columns the reward reads plus ``completion``, a gold completion (one that should
score well). :func:`rewardkit.testing.check_reward` runs every check; its report is what is printed and written.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardkit.files.jsonl import read_rows


class RewardSpecError(ValueError):
    """``FILE.py:NAME`` names no reward (a usage error: exit 2)."""


def split_spec(spec: str) -> tuple[Path, str]:
    """``FILE.py:NAME`` -> (FILE.py, NAME); the last colon splits, so a Windows drive letter survives."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise RewardSpecError(f"{spec!r}: expected FILE.py:NAME (a function or class in FILE.py)")
    return Path(path), name


def load_reward(spec: str) -> Any:
    """The reward ``FILE.py:NAME`` names: the function, or an instance of the class built with no arguments."""
    path, name = split_spec(spec)
    if not path.is_file():
        raise RewardSpecError(f"{path}: not found (from {spec!r})")
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
    finally:
        sys.path.remove(folder)
    if not hasattr(module, name):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RewardSpecError(f"{path}: no {name!r}; callables there: {', '.join(found) or 'none'}")
    obj = getattr(module, name)
    if isinstance(obj, type):
        try:
            return obj()
        except TypeError as exc:
            raise RewardSpecError(f"{spec}: the class cannot be built with no arguments ({exc})") from exc
    if not callable(obj):
        raise RewardSpecError(f"{spec}: is a {type(obj).__name__}, not a function or class")
    return obj


def lint_reward(
    spec: str, data: str | Path, *, margin: float = 0.1, time_limit_s: float = 2.0, checks: Sequence[str] | None = None
) -> Any:
    """The kit's :class:`~rewardkit.testing.Report` for the reward ``spec`` on the rows of ``data``."""
    from rewardkit.testing import check_reward

    reward = load_reward(spec)
    rows = read_rows(data, "--data", required=("completion",))
    return check_reward(reward, rows, margin=margin, time_limit_s=time_limit_s, checks=checks)
