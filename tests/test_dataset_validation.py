"""A dataset bug surfaces on the first batch, whatever the model wrote.

Every case puts a good row first and the bad one at row 1, scored against a garbage completion:
the error must name the column and row 1 and say how to fix it.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from conftest import E5, GOLD, GOOD, solution, step

from rewardkit.envs.retail.domain import tasks
from rewardkit.envs.task_verdict import VERDICTS
from rewardkit.envs.tasks import TaskError
from rewardkit.rewards import (
    ExpertMatch,
    PlanCoverage,
    RewriteSimilarity,
    TaskCompletion,
    TaskCompletionRate,
    _rows,
    think_length,
)
from rewardkit.rewards._parsing import DatasetError, GoldError
from rewardkit.rewards.think_length import ThinkLength

GARBAGE = "xyz"
TASK = tasks()["0"]  # retail task 0: five gold actions, no expected outputs
PLANNING = [ExpertMatch, PlanCoverage, RewriteSimilarity]


def task_with(**criteria: Any) -> dict[str, Any]:
    task = copy.deepcopy(TASK)
    task["evaluation_criteria"].update(criteria)
    return task


def action(**fields: Any) -> dict[str, Any]:
    return {"action_id": "x", "name": "get_order_details", "arguments": {"order_id": "#W1"}, **fields}


PLANNING_CASES = [
    # The gold expert is not offered in the row: used to raise only once a completion named a listed expert.
    # ('数据分析专家x' would not do: it resolves fuzzily to 数据分析专家, ratio 92.3 >= 85.)
    (solution("q", step("外星专家", "t")), E5, "column 'solution' row 1: step 0: gold expert '外星专家' is not in"),
    # A non-string rewrite used to be dropped, so RewriteSimilarity scored None as if there were no gold.
    (json.dumps({"补全后的问题": 42, "plan": []}), E5, "the gold '补全后的问题' must be a string or null; got 42"),
    # depends_on pointing forward (or at itself, or out of range) used to count as a gold edge that no plan can match.
    (solution("q", step("数据分析专家", "t", depends_on=[1]), step("策略推荐专家", "u")), E5, "[1] must point"),
    (solution("q", step("数据分析专家", "t", depends_on=[0])), E5, "step 0: 'depends_on' [0] must point at no step"),
    (solution("q", step("数据分析专家", "t"), step("策略推荐专家", "u", depends_on=[-1])), E5, "earlier steps"),
    # Non-integer indices used to be dropped silently (and True read as 1).
    (solution("q", step("数据分析专家", "t"), step("策略推荐专家", "u", depends_on=["0"])), E5, "list of step"),
    (solution("q", step("数据分析专家", "t"), step("策略推荐专家", "u", depends_on=[True])), E5, "list of step"),
    # A step without an expert used to become the expert "".
    (json.dumps({"补全后的问题": "q", "plan": [{"处理问题": ["t"]}]}), E5, "step 0 needs a non-empty string '专家'"),
    # Tasks of the wrong type used to be stringified ("None", "1").
    (json.dumps({"plan": [{"专家": "数据分析专家", "处理问题": None}]}), E5, "'处理问题' must be a list of strings"),
    (json.dumps({"plan": [{"专家": "数据分析专家", "处理问题": [1]}]}), E5, "'处理问题' must be a list of strings"),
    (json.dumps({"plan": "数据分析专家"}), E5, "'plan' must be a list of step objects"),
    ("not json", E5, "column 'solution' row 1: must hold the gold answer as a JSON object"),
    # The experts cell itself: a bare name is not a list.
    (GOLD, "数据分析专家", "column 'experts' row 1: must be a list of expert names"),
    (GOLD, [1, 2], "column 'experts' row 1: must be a list of expert names"),
]


class TestPlanningRows:
    @pytest.mark.parametrize(("gold", "experts", "fragment"), PLANNING_CASES)
    @pytest.mark.parametrize("cls", PLANNING, ids=lambda c: c.__name__)
    def test_bad_row_raises_on_the_first_call(self, cls: type, gold: Any, experts: Any, fragment: str) -> None:
        with pytest.raises(GoldError) as info:
            cls()([GOOD, GARBAGE], solution=[GOLD, gold], experts=[E5, experts])
        message = str(info.value)
        assert fragment in message and "row 1" in message and "fix the dataset row" in message

    def test_rewrite_similarity_without_an_experts_column_checks_the_rest(self) -> None:
        # No experts column: membership cannot be checked, everything else is.
        unlisted = solution("q", step("外星专家", "t"))
        assert RewriteSimilarity()([GARBAGE], solution=[unlisted]) == [0.0]
        with pytest.raises(GoldError, match="row 0: step 0: 'depends_on'"):
            RewriteSimilarity()([GARBAGE], solution=[solution("q", step("a", "t", depends_on=[0]))])

    @pytest.mark.parametrize(
        ("cls", "gold", "expected"),
        [
            # Valid rows score exactly as before, including the accepted leniencies.
            (ExpertMatch, GOLD, 1.0),
            (PlanCoverage, GOLD, 1.0),
            (RewriteSimilarity, GOLD, 1.0),
            (ExpertMatch, solution("查看经营周报", step("数据分析 专家", "t")), 1.0),  # fuzzy gold name resolves
            (ExpertMatch, json.dumps({"plan": [{"专家": "数据分析专家", "处理问题": "t", "depends_on": None}]}), 1.0),
            (RewriteSimilarity, json.dumps({"补全后的问题": None, "plan": []}), None),  # null rewrite: no gold
            (ExpertMatch, None, None),  # no gold at all
        ],
    )
    def test_valid_rows_score_as_before(self, cls: type, gold: Any, expected: float | None) -> None:
        assert cls()([GOOD], solution=[gold], experts=[E5]) == [expected]

    def test_failures_are_not_cached_so_each_batch_names_its_row(self) -> None:
        bad = solution("q", step("外星专家", "t"))
        for row in (0, 2):
            golds, experts = [GOLD] * 3, [E5] * 3
            golds[row] = bad
            with pytest.raises(GoldError, match=f"column 'solution' row {row}: "):
                ExpertMatch()([GARBAGE] * 3, solution=golds, experts=experts)

    def test_once_per_distinct_row_across_batches_and_rewards(self) -> None:
        _rows.PLANNING_ROWS.clear()
        other = solution("q", step("策略推荐专家", "t"))
        # A GRPO batch: 2 prompts x 4 generations, the rows repeat.
        columns = {"solution": [GOLD] * 4 + [other] * 4, "experts": [E5] * 8}
        for cls in PLANNING:  # the three rewards share one validation per row
            for _ in range(3):
                cls()([GARBAGE] * 8, **columns)
        assert _rows.PLANNING_ROWS.validations == 2
        ExpertMatch(config={"expert_match": {"fuzzy_threshold": 95}})([GARBAGE] * 8, **columns)
        assert _rows.PLANNING_ROWS.validations == 4  # another threshold can change the verdict: checked again

    def test_a_batch_is_checked_by_its_cells_not_by_its_shape(self) -> None:
        # The rows of a batch are kept for the rewards after the first (one lookup a batch). The same solutions with
        # another experts list are another batch: checked again, and row 1 names a gold expert the list lacks.
        columns = {"solution": [GOLD, GOLD], "experts": [E5, E5]}
        assert ExpertMatch()([GARBAGE] * 2, **columns) == [0.0, 0.0]
        assert ExpertMatch()([GARBAGE] * 2, **columns) == [0.0, 0.0]  # the kept batch
        with pytest.raises(GoldError, match="column 'solution' row 1: step 0: gold expert '数据分析专家' is not in"):
            ExpertMatch()([GARBAGE] * 2, solution=[GOLD, GOLD], experts=[E5, ["策略推荐专家"]])

    def test_cache_is_bounded(self) -> None:
        cache = _rows.RowCache(maxsize=2)
        for key in "abc":
            cache.get(key, lambda k=key: k)
        assert cache.get("a", lambda: "again") == "again"  # "a" was evicted first
        assert cache.validations == 4 and len(cache._values) == 2


class TestThinkBandColumns:
    @pytest.mark.parametrize(
        ("columns", "error"),
        [
            # Length: one value per completion (a short column used to raise IndexError, a long one nothing).
            ({"think_min": [10, 10, 10]}, "column 'think_min' has 3 values for 2 completions"),
            ({"think_max": 30}, "column 'think_max' has a int for 2 completions"),
            # Finiteness: NaN compared false everywhere and gave 1.0 or NaN.
            ({"think_max": [None, math.nan]}, "column 'think_max' row 1: nan is not a finite number >= 0"),
            ({"think_min": [None, math.inf]}, "column 'think_min' row 1: inf is not a finite number"),
            ({"think_max": [None, "lots"]}, "column 'think_max' row 1: 'lots' is not a finite number"),
            ({"think_min": [None, -5]}, "column 'think_min' row 1: -5 is not a finite number >= 0"),
            ({"think_min": [None, True]}, "column 'think_min' row 1: True is not"),
            # Order: checked for every row, not only for completions that have a think.
            ({"think_min": [None, 30], "think_max": [None, 20]}, "row 1: 30 is greater than think_max 20"),
            ({"think_max": [None, 5]}, "row 1: 10 is greater than think_max 5"),  # null min: config's 10
        ],
    )
    def test_bad_cells_raise_whatever_the_completion(self, columns: dict[str, Any], error: str) -> None:
        with pytest.raises(DatasetError) as info:
            ThinkLength(config={"think_length": {"min": 10, "max": 20}})([GARBAGE, GARBAGE], **columns)
        assert error in str(info.value)

    def test_valid_cells_still_override(self) -> None:
        # Numeric strings were accepted before and still are; null takes the config's value.
        reward = ThinkLength(config={"think_length": {"min": 10, "max": 20}})
        assert reward([GOOD, GARBAGE], think_min=["5", None], think_max=[400, None]) == [1.0, 0.0]

    def test_once_per_distinct_band(self) -> None:
        think_length.BAND_ROWS.clear()
        reward = ThinkLength()
        for _ in range(3):
            reward([GARBAGE] * 4, think_min=[10, 10, 20, 20], think_max=[100, 100, 100, 100])
        assert think_length.BAND_ROWS.validations == 2


TAU2_CASES = [
    # A string was read as its characters: any one letter said counted as an expected output.
    (task_with(communicate_info="536.65"), "retail", "column 'task' row 1: evaluation_criteria.communicate_info"),
    (task_with(communicate_info=[536.65]), "retail", "communicate_info: must be a list of strings, got a list"),
    # An unknown tool fails on replay, so doing nothing matched the gold and scored 1.0.
    (task_with(actions=[action(name="refund_everything")]), "retail", "tool 'refund_everything' does not exist"),
    (task_with(actions=["get_order_details"]), "retail", "actions[0]: must be an object with a string 'name'"),
    (task_with(actions=[action(name=None)]), "retail", "actions[0]: must be an object with a string 'name'"),
    (task_with(actions=[action(arguments=["#W1"])]), "retail", "actions[0]: 'arguments' must be an object"),
    (task_with(actions=[action(compare_args="order_id")]), "retail", "'compare_args' must be a list"),
    (task_with(actions={"name": "x"}), "retail", "evaluation_criteria.actions: must be a list of action objects"),
    ("{not json", "retail", "column 'task' row 1: holds a string that is not JSON"),
    (TASK, "airline", "column 'domain' row 1: unknown domain 'airline'; known domains: livestream, retail"),
    (TASK, None, "column 'domain' row 1: must name a domain: 'retail', an installed domain or a domain folder's path"),
    # Gold arguments the tool's schema refuses: the gold call ran nothing, so doing nothing matched the gold.
    (
        task_with(actions=[action(name="cancel_pending_order", arguments={"order_id": "#W6779827"})]),
        "retail",
        "actions[0]: the arguments of 'cancel_pending_order' do not fit its schema (arguments: 'reason' is a required",
    ),
    (
        task_with(actions=[action(arguments={"order_id": 5})]),
        "retail",
        "actions[0]: the arguments of 'get_order_details' do not fit its schema (order_id: 5 is not of type 'string')",
    ),
    # A gold write that fails on a fresh database: the same hack, with arguments that fit the schema.
    (
        task_with(
            actions=[
                action(name="cancel_pending_order", arguments={"order_id": "#W0000000", "reason": "no longer needed"})
            ]
        ),
        "retail",
        "actions[0]: the gold write 'cancel_pending_order' fails when the gold "
        "actions are replayed on a fresh database (NOT_FOUND: Order not found)",
    ),
    # Bundled tau2 tasks 64 and 105 (_retail_gold.py): their gold writes fail too.
    (
        tasks()["105"],
        "retail",
        "actions[0]: the gold write 'exchange_delivered_order_items' fails when the gold "
        "actions are replayed on a fresh database (INSUFFICIENT_FUNDS: ",
    ),
    (
        tasks()["64"],
        "retail",
        "actions[6]: the gold write 'exchange_delivered_order_items' fails when the gold "
        "actions are replayed on a fresh database (PRECONDITION_FAILED: ",
    ),
]


class TestTau2Rows:
    @pytest.mark.parametrize(("task", "domain", "fragment"), TAU2_CASES)
    @pytest.mark.parametrize("cls", [TaskCompletion, TaskCompletionRate], ids=lambda c: c.__name__)
    def test_bad_row_raises_on_the_first_call(self, cls: type, task: Any, domain: Any, fragment: str) -> None:
        with pytest.raises(TaskError) as info:
            cls()([GARBAGE] * 2, messages=[[], []], task=[TASK, task], domain=["retail", domain])
        assert fragment in str(info.value)
        assert isinstance(info.value, ValueError)  # still caught by existing `except ValueError`

    @pytest.mark.parametrize(
        ("cell", "error"),
        [
            ("[{oops", "column 'messages' row 0: holds a string that is not JSON"),
            ({"role": "assistant"}, "column 'messages' row 0: must be a list of chat messages"),
        ],
    )
    def test_a_messages_cell_that_is_no_list_is_a_dataset_bug(self, cell: Any, error: str) -> None:
        with pytest.raises(DatasetError, match=error.replace("[", r"\[").replace("{", r"\{")):
            TaskCompletion()([GARBAGE], messages=[cell], task=[TASK], domain=["retail"])

    def test_once_per_distinct_row(self) -> None:
        VERDICTS.clear()
        batch = {
            "messages": [[]] * 4,
            "task": [TASK, TASK, json.dumps(TASK), json.dumps(TASK)],
            "domain": ["retail"] * 4,
        }
        for cls in (TaskCompletion, TaskCompletionRate):
            for _ in range(2):
                assert cls()([GARBAGE] * 4, **batch) == [0.0] * 4
        # One verdict for the object and its JSON text (the same task), kept for the 16 scorings.
        assert VERDICTS.keys() == [("retail", json.dumps(TASK))]
