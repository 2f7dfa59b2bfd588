"""``rewardkit lint RECIPE``'s scoring: each cell judged by the kit's own shape and values rules, the weighted
total that ms-swift's nansum makes (shared with ``rewardkit score``), and the ``completion`` of a tool-use gold."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rewardkit.lint.gold import COMPLETION, with_gold
from rewardkit.lint.samples import Cell, score_one, weighted
from rewardkit.rewards.answers import load_schema
from rewardkit.runs.stats.scoring import ScoreTable
from rewardkit.testing.totals import weighted_total


def returning(value: Any) -> Any:
    def reward(completions: list[str], **kwargs: Any) -> Any:
        return value

    return reward


def raising(completions: list[str], **kwargs: Any) -> list[float]:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("reward", "kind", "value", "error"),
    [
        (returning([0.5]), "ok", 0.5, None),
        (returning([None]), "none", None, None),  # a function may return None unless it declares otherwise
        (returning([math.nan]), "nan", math.nan, None),
        (returning([math.inf]), "nan", math.inf, None),  # an infinity counts like NaN
        (returning([-math.inf]), "nan", -math.inf, None),
        (returning([1]), "error", None, "value 0 is 1 (int); each must be a float or None"),
        (returning([True]), "error", None, "value 0 is True (bool); each must be a float or None"),
        (returning([1.5]), "error", None, "value 0 is 1.5, outside the declared range [0.0, 1.0]"),
        (returning([0.5, 0.5]), "error", None, "returned 2 values for 1 completion"),
        (returning(0.5), "error", None, "returned float 0.5, not a list"),
        (raising, "error", None, "RuntimeError: boom"),
    ],
    ids=["float", "none", "nan", "inf", "minus-inf", "int", "bool", "out-of-range", "two", "not-a-list", "raises"],
)
def test_score_one_judges_a_cell_as_the_kit_does(reward: Any, kind: str, value: Any, error: str | None) -> None:
    cell = score_one(reward, {"completion": "x"})
    assert cell.kind == kind and cell.error == error
    assert cell.value == value or (math.isnan(cell.value) and math.isnan(value))


class Declares:
    """A reward that declares a wider range and no None."""

    range = (0.0, 2.0)
    may_return_none = False

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, completions: list[str], **kwargs: Any) -> list[Any]:
        return [self.value]


@pytest.mark.parametrize(
    ("value", "kind", "error"),
    [
        (1.5, "ok", None),  # inside its own [0, 2]
        (None, "error", "value 0 is None, and the reward declares it never returns None (may_return_none = False)"),
    ],
)
def test_score_one_reads_what_the_reward_declares(value: Any, kind: str, error: str | None) -> None:
    cell = score_one(Declares(value), {"completion": "x"})
    assert (cell.kind, cell.error) == (kind, error)


@pytest.mark.parametrize(
    ("weights", "scores", "total"),
    [
        ([0.5, 0.5], [1.0, 0.2], 0.6),  # 0.5 * 1 + 0.5 * 0.2
        ([0.5, 0.5], [1.0, None], 0.5),  # None adds 0
        ([0.5, 0.5], [math.nan, 0.2], 0.1),  # NaN adds 0: 0.5 * 0.2
        ([1.0, 2.0], [math.inf, 0.25], 0.5),  # an infinity adds 0: 2 * 0.25
        ([0.0, 1.0], [math.nan, 0.0], 0.0),  # weight 0 x NaN adds 0, not NaN
    ],
    ids=["floats", "none", "nan", "inf", "zero-weight-nan"],
)
def test_one_nansum_rule_for_score_and_lint(weights: list[float], scores: list[Any], total: float) -> None:
    assert weighted_total(weights, scores) == pytest.approx(total)
    assert ScoreTable(["row"], ["a", "b"], [scores], weights).total(0) == pytest.approx(total)
    cells = {k: [Cell(s, None, 0.0)] for k, s in zip("ab", scores, strict=True)}
    assert weighted(cells, dict(zip("ab", weights, strict=True)), 0) == pytest.approx(total)


def test_an_error_adds_0_to_the_lint_total() -> None:
    cells = {"a": [Cell(None, "RuntimeError: boom", 0.0)], "b": [Cell(0.25, None, 0.0)]}
    assert weighted(cells, {"a": 1.0, "b": 2.0}, 0) == 0.5  # 1 x 0 + 2 x 0.25


USER = {"role": "user", "content": "Cancel order #1."}
CALL = {"role": "assistant", "content": '<tool_call>\n{"name": "cancel", "arguments": {}}\n</tool_call>'}
TOOL = {"role": "tool", "content": '{"status": "cancelled"}'}


@pytest.mark.parametrize(
    ("messages", "completion"),
    [
        ([USER, CALL, TOOL, {"role": "assistant", "content": "Done."}], "Done."),
        ([USER, CALL, TOOL], CALL["content"]),  # ends in a tool result: the last assistant message still
        ([USER, CALL, {"role": "assistant", "content": [{"type": "text", "text": "x"}]}], ""),  # not text
    ],
    ids=["closing-line", "ends-in-a-tool-result", "content-not-text"],
)
def test_a_tool_use_gold_completion_is_its_last_assistant_message(messages: list[dict], completion: str) -> None:
    rows, source = with_gold([{"messages": messages}], tool_use=True, schema=load_schema("zh"), where="rows.jsonl")
    assert source == COMPLETION and rows == [{"messages": messages, "completion": completion}]
