"""The contract every registered reward keeps, planning and episode alike.

Each reward in ``rewardkit.rewards.REWARDS`` is called on one batch built from the
columns it declares (``columns``, always passed, and ``optional_columns``, passed
here too), taken from ``CELLS`` below: one small fixture per column, five rows.

The generic checks are rewardkit.testing's, the very kit users run on their own rewards
(docs/testing.md), so the two cannot drift: shape, values in the declared ``range`` with
None only where ``may_return_none``, determinism, independence of the batch, no mutation,
extra columns ignored, a missing column named, pickling, 64 threads, TRL's conversational
completions, the hostile inputs and, on the rows whose completion is the reward's gold,
the gaming probes (a probe the reward declares ``gameable`` is reported as waived). Here,
on top of the kit:

- the batch's scores are the pinned ones, and a reward documented ``Range: {0.0, 1.0}`` is binary;
- the ``range`` and ``may_return_none`` a reward declares agree with its docstring;
- the other rewards' columns (and ms-swift's and TRL's extras) are ignored;
- a missing declared column raises MissingColumnError naming it and how to build rows;
- a column of the wrong length, or a scalar in place of a column, raises naming it.

A new reward joins by being a file of ``rewards/`` (the registry finds it) with its own test,
``tests/test_<key>.py``, which pins its scores on this batch as ``CONTRACT``, gives its fixture as
``CONTRACT_CELLS`` (``{column: N cells}``) for a column no other reward reads, and brings the rows
it scores as its gold as ``GOLD_ROWS`` (``[{column: cell, ..., "completion": text}]``) where no row
of the batch is. Nothing here names a reward, and nothing here is edited for a new one.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from functools import cache
from types import ModuleType
from typing import Any

import pytest
from conftest import E5, GOLD, GOOD, THINK, answer, completion, step

from rewardkit.envs.retail.domain import tasks
from rewardkit.rewards import REWARDS
from rewardkit.rewards._base import MissingColumnError, Reward
from rewardkit.testing import check_names, check_reward, declared

TASKS = tasks()
N = 5


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _trajectory(task: dict[str, Any], n_actions: int | None = None) -> list[dict[str, Any]]:
    """A Hermes-style episode replaying the task's first ``n_actions`` gold actions, then saying its outputs."""
    criteria = task["evaluation_criteria"]
    messages = [{"role": "user", "content": "help me"}]
    for action in criteria["actions"][:n_actions]:
        call = json.dumps({"name": action["name"], "arguments": action["arguments"]})
        messages += [_said(f"<tool_call>\n{call}\n</tool_call>"), {"role": "tool", "content": "{}"}]
    said = criteria["communicate_info"] if n_actions is None else []
    return [*messages, _said("All done. " + " ".join(said))]


PLAN = answer("查看经营周报", step("数据分析专家", "查看经营周报"))
ANSWER_ONLY = "<answer>\n" + json.dumps(PLAN, ensure_ascii=False)
# The completions: what the planning rewards read (the episode rewards read 'messages' instead).
COMPLETIONS = [
    GOOD,  # the planner's layout, matching the gold
    completion(THINK, answer("查看周报", step("策略推荐专家", "推荐策略"))),  # well formed, wrong plan
    "garbage <think> no close",
    "",
    ANSWER_ONLY + "\n</answer>",  # no think block; its gold has neither rewrite nor plan
]
# One fixture per column any registered reward declares: N cells each, valid for the column.
CELLS: dict[str, list[Any]] = {
    # planning: the gold answer (JSON string) and the row's offered experts
    "solution": [GOLD, GOLD, GOLD, GOLD, "{}"],
    "experts": [E5, E5, json.dumps(E5, ensure_ascii=False), E5, E5],
    "think_min": [None, 60, None, None, None],
    "think_max": [None, 80, None, None, None],
    # tau2 episodes: the conversation, the task (object or JSON) and its domain
    "messages": [
        _trajectory(TASKS["59"]),  # gold actions, outputs said
        _trajectory(TASKS["59"], 4),  # three lookups and the cancel, not the address change; nothing said
        [_said("<tool_call>{not json</tool_call> \ud800 \x00")],
        [],
        _trajectory(TASKS["59"]),
    ],
    "task": [TASKS["59"], json.dumps(TASKS["59"]), TASKS["0"], TASKS["0"], TASKS["59"]],
    "domain": ["retail"] * N,
    "rollout_infos": [None, {"num_turns": 3}, None, None, {"termination": "user_sim_error"}],
}
KEYS = list(REWARDS)


@cache
def own_test(key: str) -> ModuleType:
    """``tests/test_<key>.py``, the reward's own test, which pins its scores on this batch."""
    try:
        module = importlib.import_module(f"test_{key}")
    except ModuleNotFoundError as exc:
        raise AssertionError(f"{key} has no own test: write tests/test_{key}.py with its CONTRACT scores") from exc
    assert hasattr(module, "CONTRACT"), f"tests/test_{key}.py: pin the reward's scores on the contract batch (CONTRACT)"
    return module


def expected(key: str) -> list[float | None]:
    return list(own_test(key).CONTRACT)


def cells(name: str, key: str) -> list[Any]:
    """The column's fixture: the shared one, else the one the reward's own test gives."""
    return list(CELLS[name]) if name in CELLS else list(getattr(own_test(key), "CONTRACT_CELLS", {})[name])


COLUMNS = [(key, name) for key in KEYS for name in REWARDS[key].columns]
GOLD_SCORE = 0.9  # a row is the reward's gold, for the gaming probes, when its pinned score is at least this
GENERIC_CHECKS = [name for name in check_names() if not name.startswith("gaming")]
ALL_COLUMNS = [(key, name) for key in KEYS for name in (*REWARDS[key].columns, *REWARDS[key].optional_columns)]


def read(cls: type) -> tuple[str, ...]:
    return (*cls.columns, *cls.optional_columns)


def batch(key: str) -> dict[str, Any]:
    """The columns ``REWARDS[key]`` declares, as the batch's keyword arguments."""
    return {name: cells(name, key) for name in read(REWARDS[key])}


def call(reward: Any, key: str, **extra: Any) -> list[float | None]:
    return reward(list(COMPLETIONS), **batch(key), **extra)


def rows(key: str, only: list[int] | None = None) -> list[dict[str, Any]]:
    """The contract batch as the kit's rows: the declared columns' cells plus ``completion``."""
    return [
        {**{name: cells(name, key)[i] for name in read(REWARDS[key])}, "completion": COMPLETIONS[i]}
        for i in (range(N) if only is None else only)
    ]


def gold_rows(key: str) -> list[dict[str, Any]]:
    """The rows the reward scores as its gold, for the gaming probes: those its own test brings (``GOLD_ROWS``, each
    a row of its columns plus ``completion``), else the batch's rows whose pinned score is at least GOLD_SCORE."""
    own = getattr(own_test(key), "GOLD_ROWS", None)
    if own is not None:
        return list(own)
    return rows(key, [i for i, e in enumerate(expected(key)) if e is not None and e >= GOLD_SCORE])


def documented_range(cls: type) -> tuple[str, bool]:
    """The ``Range:`` its docstring states ({0.0, 1.0} or [0, 1]) and whether it ever returns None."""
    doc = inspect.getdoc(cls) or ""
    found = re.search(r"Range: (\{0\.0, 1\.0\}|\[0, 1\])", doc)
    assert found, f"{cls.__name__}'s docstring must state 'Range: {{0.0, 1.0}}' or 'Range: [0, 1]'"
    return found.group(1), re.search(r"never (returns )?None", doc, re.IGNORECASE) is None


def documented_columns(cls: type) -> set[str]:
    """The ``names`` in the docstring's ``Columns:`` paragraph, asides in parentheses left out."""
    doc = inspect.getdoc(cls) or ""
    paragraph = re.search(r"Columns:(.*?)(?:Range:|\n\n|$)", doc, re.DOTALL)
    assert paragraph, f"{cls.__name__}'s docstring must list its columns ('Columns: ...')"
    names = re.sub(r"\([^()]*\)", "", paragraph.group(1))  # not "(tool calls in ``<tool_call>`` blocks ...)"
    return set(re.findall(r"``([a-z_]+)``", names))


@pytest.mark.parametrize("key", KEYS)
def test_every_reward_is_a_reward_with_its_own_test_and_fixtures(key: str) -> None:
    cls = REWARDS[key]
    assert issubclass(cls, Reward), key
    assert len(expected(key)) == N, f"tests/test_{key}.py: CONTRACT needs one score per row ({N})"
    own = getattr(own_test(key), "CONTRACT_CELLS", {})
    missing = [name for name in read(cls) if name not in CELLS and name not in own]
    assert not missing, f"{cls.__name__} reads {missing}: give a fixture for each as CONTRACT_CELLS in its own test"
    assert all(len(c) == N for c in (*CELLS.values(), *own.values()))


@pytest.mark.parametrize("key", KEYS)
def test_documented_columns_are_declared(key: str) -> None:
    """Every ``name`` in the docstring's ``Columns:`` paragraph is in ``columns`` or ``optional_columns``."""
    cls = REWARDS[key]
    undeclared = sorted(documented_columns(cls) - set(read(cls)))
    assert not undeclared, f"{cls.__name__} reads {undeclared} without declaring them"


@pytest.mark.parametrize("key", KEYS)
class TestEveryReward:
    def test_scores_are_the_pinned_ones(self, key: str) -> None:
        values, _ = documented_range(REWARDS[key])
        scores = call(REWARDS[key](), key)
        assert scores == [None if e is None else pytest.approx(e, abs=1e-6) for e in expected(key)]
        if values == "{0.0, 1.0}":
            assert all(s in (0.0, 1.0) for s in scores if s is not None), scores

    def test_the_declaration_matches_the_docstring(self, key: str) -> None:
        # Both documented ranges are inside [0, 1]; "Never returns None" <-> may_return_none = False.
        cls = REWARDS[key]
        _, none_ok = documented_range(cls)
        found = declared(cls())
        assert (found.range, found.allow_none, found.tool_use) == ((0.0, 1.0), none_ok, "messages" in cls.columns)

    def test_the_testing_kit_passes(self, key: str) -> None:
        # 256 draws, not the kit's 4096: these rewards hold no state between calls, and the episode rewards
        # replay a database per call (4096 draws of them cost 20 s each).
        report = check_reward(REWARDS[key](), rows(key), checks=GENERIC_CHECKS, draws=256)
        report.raise_for_failures()
        assert [c.name for c in report.checks] == GENERIC_CHECKS  # every generic and hostile check ran

    def test_gaming_probes_stay_below_the_gold(self, key: str) -> None:
        golds = gold_rows(key)
        assert golds, (
            f"{key} has no gold row: give GOLD_ROWS in tests/test_{key}.py (or score a batch row >= {GOLD_SCORE})"
        )
        columns = {name: [row.get(name) for row in golds] for name in read(REWARDS[key])}
        scores = REWARDS[key]()([row["completion"] for row in golds], **columns)
        assert all(s is not None and s >= GOLD_SCORE for s in scores), (key, scores)  # its gold rows are its gold
        report = check_reward(REWARDS[key](), golds, checks=["gaming"])
        report.raise_for_failures()
        gaps = REWARDS[key].gameable
        waived = {c.name.removeprefix("gaming:") for c in report.checks if c.detail.startswith("waived")}
        assert len(report.checks) >= 5 and all(name in gaps or "*" in gaps for name in waived), waived
        ran = {c.name.removeprefix("gaming:") for c in report.checks}
        stale = (set(gaps) & ran) - waived  # a declared gap, tried here, that the reward no longer has
        assert not stale, f"{key} declares gameable probes that score below its gold: {sorted(stale)}"

    def test_unknown_kwargs_are_ignored(self, key: str) -> None:
        reward = REWARDS[key]()
        known = {*read(REWARDS[key]), *documented_columns(REWARDS[key])}
        others = {name: cells for name, cells in CELLS.items() if name not in known}
        extra = {"trainer_state": object(), "completion_ids": [[1]] * N, "prompts": [[]] * N, "foo": [1] * N}
        assert call(reward, key, **others, **extra) == call(reward, key)


@pytest.mark.parametrize(("key", "name"), COLUMNS, ids=[f"{k}-{c}" for k, c in COLUMNS])
def test_missing_column_raises_naming_it(key: str, name: str) -> None:
    cls = REWARDS[key]
    columns = batch(key)
    del columns[name]
    with pytest.raises(MissingColumnError, match=re.escape(repr(name))) as raised:
        cls()(list(COMPLETIONS), **columns)
    assert cls.dataset_format in str(raised.value)  # and says how to build rows that carry it


@pytest.mark.parametrize(("key", "name"), ALL_COLUMNS, ids=[f"{k}-{c}" for k, c in ALL_COLUMNS])
def test_wrong_length_column_raises_naming_it(key: str, name: str) -> None:
    reward, column = REWARDS[key](), cells(name, key)
    for wrong, got in ((column[:-1], f"{N - 1} values"), ([*column, column[0]], f"{N + 1} values"), ("abcde", "a str")):
        with pytest.raises(ValueError, match=rf"column '{name}' has {got} for {N} completions"):
            reward(list(COMPLETIONS), **{**batch(key), name: wrong})
