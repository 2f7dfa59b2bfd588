"""TaskCompletionRate: the share of a task's criteria met (its writes, its outputs, the final state), by hand."""

from __future__ import annotations

import pytest
from test_task_completion import TASKS, final_hash, gold, hermes, info, score

from rewardkit.envs.retail.specs import TOOLS
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
    )  # fmt: skip
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
