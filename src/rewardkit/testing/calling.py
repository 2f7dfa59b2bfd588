"""Calling any reward the same way, and reading what it declares.

A reward is a callable scoring a batch: ms-swift's ``reward(completions, **columns)``, TRL's
``fn(completions, **kwargs)`` or ``fn(prompts, completions, **kwargs)``, a function or an instance.
A *row* is a dict of dataset columns plus ``completion``. :func:`score` turns rows into the keyword
columns a trainer passes: ``completion`` -> ``completions``, every other key -> a list of that key's
cells, and ``prompts`` (from ``prompt``, else ``messages``) for a reward whose signature names it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from rewardkit.errors import UserError
from rewardkit.testing.content import ALL_PROBES

Row = Mapping[str, Any]
DEFAULT_RANGE = (0.0, 1.0)
# What ms-swift and TRL pass as ``trainer_state`` with every batch: one ``transformers.TrainerState``, here
# mid-training. The same fields (tests/test_kit_false_passes.py compares them with the real class), without
# importing torch.
TRAINER_STATE = SimpleNamespace(
    epoch=0.5,
    global_step=10,
    max_steps=20,
    logging_steps=1,
    eval_steps=500,
    save_steps=500,
    train_batch_size=8,
    num_train_epochs=1,
    num_input_tokens_seen=0,
    total_flos=0.0,
    log_history=[],
    best_metric=None,
    best_global_step=None,
    best_model_checkpoint=None,
    is_local_process_zero=True,
    is_world_process_zero=True,
    is_hyper_param_search=False,
    trial_name=None,
    trial_params=None,
    stateful_callbacks={},
)


class RewardExit(RuntimeError):
    """The reward raised ``SystemExit`` (called ``sys.exit``): a failure of the reward, never the end of the run."""


class DeclarationError(UserError, ValueError):
    """What a reward declares (``range``, ``may_return_none``, ``columns``, ``gameable``) cannot be meant."""


def _parameters(reward: Callable[..., Any]) -> dict[str, inspect.Parameter] | None:
    try:
        return dict(inspect.signature(reward).parameters)
    except (TypeError, ValueError):  # a builtin or an odd callable: call it positionally
        return None


def columns_of(rows: Sequence[Row]) -> dict[str, list[Any]]:
    """Every column the rows carry (``completion`` and ``prompt`` included), one cell per row, None where absent."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: [row.get(name) for row in rows] for name in names}


def call(reward: Callable[..., Any], completions: list[Any], columns: Mapping[str, list[Any]]) -> Any:
    """``reward`` on ``completions`` with ``columns`` as keyword arguments, as a trainer calls it.

    ``completions`` goes by keyword when the signature names it or its first parameter is a column (TRL's way),
    else first and positional (ms-swift's). ``trainer_state`` (:data:`TRAINER_STATE`), which both trainers pass
    with every batch, goes to a reward that can take it (the ``extra_columns`` check offers it to the others);
    ``prompts`` is added only for a reward whose signature names it.
    """
    params = _parameters(reward)
    kwargs = {k: v for k, v in columns.items() if k not in ("completion", "prompt")}
    if takes(reward, "trainer_state"):
        kwargs.setdefault("trainer_state", TRAINER_STATE)
    if names_prompts(reward) and "prompts" not in kwargs:
        kwargs["prompts"] = _prompts(columns, len(completions))
    try:
        if _by_keyword(params, kwargs):
            return reward(completions=completions, **kwargs)
        return reward(completions, **kwargs)
    except SystemExit as exc:
        raise RewardExit(f"the reward called sys.exit({exc.code!r})") from None


def _by_keyword(params: Mapping[str, inspect.Parameter] | None, kwargs: Mapping[str, Any]) -> bool:
    """TRL's call, every argument by keyword: when the signature names ``completions``, or when its first
    parameter is a column that comes by keyword (TRL's ``soft_overlong_punishment_reward(completion_ids, **kw)``);
    else ms-swift's, the completions first and positional."""
    if params is None:
        return False
    first = next(iter(params), None)
    return "completions" in params or (first is not None and first in kwargs)


def takes(reward: Callable[..., Any], name: str) -> bool:
    """Whether the reward's signature takes the keyword ``name``: it names it, or has ``**kwargs``."""
    params = _parameters(reward)
    return params is not None and (
        name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    )


def names_prompts(reward: Callable[..., Any]) -> bool:
    """Whether the reward's signature names ``prompts`` (TRL's ``fn(prompts, completions)``): :func:`call` fills it."""
    params = _parameters(reward)
    return params is not None and "prompts" in params


def _prompts(columns: Mapping[str, list[Any]], n: int) -> list[Any]:
    for name in ("prompt", "messages"):
        if name in columns:
            return list(columns[name])
    return [""] * n


def score(reward: Callable[..., Any], rows: Sequence[Row]) -> list[float | None]:
    """The reward's scores for ``rows`` in one batch (whatever it returns, unchecked: :func:`check_reward`
    checks it)."""
    cols = columns_of(rows)
    return call(reward, list(cols.get("completion", [""] * len(rows))), cols)


def name_of(reward: Any) -> str:
    name = getattr(reward, "__name__", None)
    return name if isinstance(name, str) else type(reward).__name__


@dataclass(frozen=True)
class Declared:
    """What a reward promises, from the kit's arguments, else its attributes, else the defaults."""

    range: tuple[float, float] = DEFAULT_RANGE
    allow_none: bool = True
    tool_use: bool = False
    gameable: Mapping[str, str] = field(default_factory=dict)  # probe name (or "*") -> why it may score as gold
    columns: tuple[str, ...] = ()  # the columns it says it needs


def declared(
    reward: Any,
    range: tuple[float, float] | None = None,  # shadows the builtin: the public keyword
    allow_none: bool | None = None,
    tool_use: bool | None = None,
    gameable: Mapping[str, str] | None = None,
) -> Declared:
    """Read the declaration: ``range`` and ``may_return_none`` class attributes (rewardkit's ``Reward`` has both),
    ``columns``, and ``gameable``; a reward reads ``messages`` (and gets tool-use probes) when it declares that
    column or names it as a parameter."""
    lo, hi = _bounds(range if range is not None else getattr(reward, "range", DEFAULT_RANGE))
    none = allow_none if allow_none is not None else getattr(reward, "may_return_none", True)
    if not isinstance(none, bool):
        raise DeclarationError(f"may_return_none must be True or False; got {none!r}")
    cols = getattr(reward, "columns", ())
    if isinstance(cols, str) or not isinstance(cols, Iterable) or not all(isinstance(c, str) for c in cols):
        raise DeclarationError(f"columns must be a tuple of column names; got {cols!r}")
    params = _parameters(reward) or {}
    named = list(params.items())
    if "completions" not in params:  # called positionally: the first parameter takes the completions
        named = named[1:]
    required = tuple(
        name
        for name, p in named
        if name not in ("completions", "prompts", "trainer_state")
        and p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )
    if tool_use is None:
        tool_use = "messages" in cols or "messages" in params
    gaps = _gaps(gameable if gameable is not None else getattr(reward, "gameable", {}))
    return Declared(
        range=(float(lo), float(hi)),
        allow_none=none,
        tool_use=bool(tool_use),
        gameable=gaps,
        columns=tuple(dict.fromkeys((*cols, *required))),
    )


def _bounds(bounds: Any) -> tuple[float, float]:
    """A declared ``range``: two finite numbers (not booleans, not strings), low <= high."""
    try:
        lo, hi = bounds
    except (TypeError, ValueError):  # not a pair
        raise DeclarationError(f"a reward's range must be two finite numbers; got {bounds!r}") from None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (lo, hi))
    if not numbers:
        raise DeclarationError(f"a reward's range must be two finite numbers; got {(lo, hi)!r}")
    if lo > hi:
        raise DeclarationError(f"a reward's range must be (low, high) with low <= high; got {(lo, hi)!r}")
    return float(lo), float(hi)


def _gaps(gaps: Any) -> dict[str, str]:
    """A ``gameable`` declaration: probe name (or ``"*"``) -> a non-empty reason, every name a known probe."""
    if not gaps:
        return {}
    if not isinstance(gaps, Mapping):
        raise DeclarationError(f"gameable must map probe names (or '*') to a reason; got {gaps!r}")
    known = {"*", *ALL_PROBES}
    for name, why in gaps.items():
        if name not in known:
            raise DeclarationError(f"gameable names {name!r}, not a probe; the probes are {', '.join(sorted(known))}")
        if not isinstance(why, str) or not why.strip():
            raise DeclarationError(f"gameable[{name!r}] must be the reason, a non-empty string; got {why!r}")
    return dict(gaps)
