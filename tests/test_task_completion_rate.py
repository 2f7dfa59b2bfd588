"""TaskCompletionRate: the share of a task's criteria met (its writes, its outputs, the final state), by hand."""

from __future__ import annotations

import pytest
from test_task_completion import (
    ASKED,
    CUT,
    LIMIT_ERROR,
    LIVE,
    OVER_LIMIT,
    TASKS,
    TRANSFER,
    final_hash,
    gold,
    hermes,
    info,
    says,
    score,
    user,
)

from rewardkit.envs.retail.tools import TOOLS
from rewardkit.rewards import TaskCompletionRate

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may change.
# Row 1: 1 of 2 writes, 0 of 2 outputs, wrong state: 1 / 5; row 4 ended in user_sim_error: None.
CONTRACT = [1.0, 0.2, 0.0, 0.0, None]


class TestTaskCompletionRate:
    # Task 59: writes W = {cancel #W8268610, modify address of #W2702727}, outputs O = {164.28, 625.60}:
    # five criteria, W + O + 1 (state).
    TASK = TASKS["59"]
    CANCEL, ADDRESS = (a for a in gold(TASKS["59"]) if TOOLS[a["name"]].risk == "write")

    @pytest.mark.parametrize(
        ("actions", "said", "expected"),
        [
            ("gold", ["164.28 and 625.60"], 5 / 5),
            ("gold", ["$164.28"], 4 / 5),  # 2 writes + 1 output + state
            ("cancel", ["164.28", "625.60"], 3 / 5),  # 1 write + 2 outputs, wrong state
            ("wrong_reason", ["164.28", "625.60"], 3 / 5),  # cancel unmatched, address matched, wrong state
            ("keyed", ["164.28", "625.60"], 5 / 5),  # an idempotency key does not break the match
            ("none", [], 0 / 5),
        ],
    )
    def test_hand_computed(self, actions: str, said: list[str], expected: float) -> None:
        cancel, address = self.CANCEL, self.ADDRESS
        chosen = {
            "gold": gold(self.TASK),
            "cancel": [cancel],
            "wrong_reason": [{**cancel, "arguments": {**cancel["arguments"], "reason": "ordered by mistake"}}, address],
            "keyed": [{**cancel, "arguments": {**cancel["arguments"], "idempotency_key": "a"}}, address],
            "none": [],
        }[actions]
        assert score(TaskCompletionRate(), self.TASK, hermes(chosen, said)) == pytest.approx(expected)

    def test_a_failed_call_with_gold_arguments_does_not_count(self) -> None:
        # cancelling the same order twice: the second call fails and must not match a second gold write
        task = TASKS["76"]  # two cancels, one output ('1939.05'): 2 + 1 + 1 criteria
        first = gold(task)[[a["name"] for a in gold(task)].index("cancel_pending_order")]
        assert score(TaskCompletionRate(), task, hermes([first, first], ["1939.05"])) == pytest.approx(2 / 4)

    def test_recorded_audit_and_hash_are_used_without_replay(self) -> None:
        task = self.TASK
        audit = [{"tool": a["name"], "arguments": a["arguments"], "code": "OK"} for a in gold(task)]
        infos = {"state_hash": final_hash(gold(task)), "audit": audit}
        # no tool calls in the messages at all: everything comes from the record
        assert score(TaskCompletionRate(), task, hermes([], info(task)), rollout_infos=[infos]) == 1.0


# On a task whose gold changes nothing the state is no criterion (doing nothing keeps it): the evidence besides the
# outputs takes its place, E of it, and the whole share counts only while the state is still the gold's:
# S * (W_matched + O_said + E_shown) / (W + O + E). Retail 50: W = O = 0, E = 1 (the transfer). Livestream t16:
# W = 0, O = 1 (199.00), E = 1 (the price cut proposed and declined). Livestream t19: O = 1 (520.00), E = 1 (the
# cut below cost not made). Before, "Goodbye." on 50 scored 1/1 (the state alone) and t16's said-only 2/2.
@pytest.mark.parametrize(
    ("domain", "task", "messages", "expected"),
    [
        ("retail", TASKS["50"], [user("Undo my cancellation."), *says("Goodbye.")], 0 / 1),
        ("retail", TASKS["50"], [user("Undo my cancellation."), *TRANSFER], 1 / 1),
        ("livestream", LIVE["t16"], [user("SP002降到169。"), *says("Goodbye.")], 0 / 2),
        ("livestream", LIVE["t16"], [user("SP002降到169。"), *says("仍是 199.00 元。")], 1 / 2),
        ("livestream", LIVE["t16"], [user("SP002降到169。"), *ASKED, user("###DECLINE###"), *says("199.00")], 2 / 2),
        (
            "livestream",
            LIVE["t16"],
            [user("SP002降到169。"), *ASKED, user("###APPROVE###"), *CUT, *says("199.00")],
            0.0,
        ),  # the price cut made: a write the task did not want, whatever else was shown
        # the cut not made, but 520.00 unsaid: a refused entry counts only beside the rest of the evidence shown,
        # so doing nothing earns neither term, (0 + 0 + 0)/(0 + 1 + 1); before, the refusal alone earned 1/2
        ("livestream", LIVE["t19"], [user("SP021改成99。"), *says("Goodbye.")], 0 / 2),
        ("livestream", LIVE["t19"], [user("SP021改成99。"), *says("成本价 520.00 元，不能改。")], 2 / 2),
        # the cut attempted (HARD_GATE, nothing changed) and the error repeated: 30% said, the refusal not shown,
        # (0 + 1 + 0)/(0 + 1 + 1)
        ("livestream", LIVE["t21"], [user("SP020改成180。"), *OVER_LIMIT, *says(LIMIT_ERROR)], 1 / 2),
    ],
    ids=[
        "50-goodbye",
        "50-transfer",
        "t16-goodbye",
        "t16-said",
        "t16-declined",
        "t16-approved",
        "t19-goodbye",
        "t19-refused",
        "t21-attempted",
    ],
)
def test_evidence_replaces_the_state_where_the_gold_changes_nothing(
    domain: str, task: dict, messages: list[dict], expected: float
) -> None:
    (value,) = TaskCompletionRate()([""], messages=[messages], task=[task], domain=[domain])
    assert value == pytest.approx(expected)
