"""The runnable examples in the rewards' docstrings: each one runs, and its printed scores are the real ones."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rewardkit.rewards
from rewardkit.rewards import REWARDS

# Every public module of the rewards package: one per reward, plus public helpers such as the answer format.
MODULES = sorted(
    f"rewardkit.rewards.{m.name}"
    for m in pkgutil.iter_modules(rewardkit.rewards.__path__)
    if not m.name.startswith("_")
)


@pytest.mark.parametrize("name", sorted({cls.__module__ for cls in REWARDS.values()}))
def test_every_reward_module_is_collected(name: str) -> None:
    assert name in MODULES


@pytest.mark.parametrize("key", list(REWARDS))
def test_every_reward_docstring_has_an_example(key: str) -> None:
    doc = REWARDS[key].__doc__ or ""
    assert ">>> " in doc, f"{REWARDS[key].__name__}'s docstring needs a runnable example"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_pass(name: str) -> None:
    module = importlib.import_module(name)
    # Failures are printed with the expected and the actual output (pytest shows the captured stdout).
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed; see the output"
