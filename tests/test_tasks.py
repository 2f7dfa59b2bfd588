"""One task validator (rewardkit.envs.tasks): the builder, the rewards and the scheduler judge a task alike."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import tau2_task

from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.envs import get_domain
from rewardkit.envs.retail.domain import tasks
from rewardkit.envs.scenario import opening_turn
from rewardkit.envs.task_verdict import task_verdict
from rewardkit.envs.tasks import (
    TaskError,
    gold_actions,
    held_out,
    instructions,
    known_info,
    placed,
    reason_for_call,
    scripted_actions,
    task_problem,
)
from rewardkit.loop.user_sim.base import Progress, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

TASK = tasks()["0"]
TOOLS = frozenset(get_domain("retail").tools)


def changed(path: str, value: Any) -> dict[str, Any]:
    return tau2_task("0", path, value)


BAD = [
    ("evaluation_criteria", "abc", "bad_evaluation_criteria", "evaluation_criteria: must be an object"),
    ("evaluation_criteria.actions", [{"name": "nope"}], "bad_evaluation_criteria", "tool 'nope' does not exist"),
    (
        "evaluation_criteria.actions",
        [{"name": "calculate", "compare_args": "x"}],
        "bad_evaluation_criteria",
        "actions[0]: 'compare_args' must be a list",
    ),
    ("evaluation_criteria.communicate_info", "17.5", "bad_evaluation_criteria", "wrap the string in a list"),
    ("user_scenario.instructions", 5, "bad_user_scenario", "instructions: must be an object or a string"),
]


@pytest.mark.parametrize(("path", "value", "reason", "fragment"), BAD)
def test_builder_and_rewards_give_the_same_detail(tmp_path: Path, path: str, value: Any, reason: str, fragment: str):
    bad = changed(path, value) | {"id": "x"}
    found = task_problem(bad, TOOLS, "retail")
    assert found is not None and found[0] == reason and fragment in found[1], found
    # The builder counts it under that reason, with that detail ...
    (tasks_file := tmp_path / "t.json").write_text(json.dumps([bad]), encoding="utf-8")
    (split := tmp_path / "s.json").write_text(json.dumps({"s": ["x"]}), encoding="utf-8")
    rows, report = build_tau2_grpo(Tau2Options(domain="retail", split="s", tasks_file=tasks_file, split_file=split))
    assert rows == [] and report.rejected == {reason: 1}
    assert report.rejects[0]["detail"] == found[1]
    # ... and a reward given the row raises with the same detail, naming the column and row.
    with pytest.raises(TaskError) as info:
        TaskCompletion()(["x"], messages=[[]], task=[bad], domain=["retail"])
    assert str(info.value).startswith(f"column 'task' row 0: {found[1]}; ")


FREE_TEXT = changed("user_scenario.instructions", "You want to return order #W1.")


@pytest.mark.parametrize(
    ("task", "kind", "reason", "known"),
    [
        (
            TASK,
            dict,
            TASK["user_scenario"]["instructions"]["reason_for_call"],
            TASK["user_scenario"]["instructions"]["known_info"],
        ),
        (FREE_TEXT, str, "You want to return order #W1.", None),  # free text is all request
        (changed("user_scenario", None), type(None), None, None),
    ],
)
def test_instructions_read_one_way(task: dict[str, Any], kind: type, reason: str | None, known: str | None) -> None:
    assert isinstance(instructions(task), kind)
    assert reason_for_call(task) == reason
    assert known_info(task) == known


def test_free_text_instructions_open_alike_in_the_builder_and_the_scripted_user() -> None:
    # The builder's opening turn and the scripted user's first reply come from the same reason_for_call.
    opening = opening_turn(instructions(FREE_TEXT))
    assert opening == "I want to return order #W1."
    first = ScriptedSimulator().reply(FREE_TEXT, [Turn("agent", "Hi! How can I help?")], Progress())
    assert first == opening


LIVESTREAM = get_domain("livestream")
DECLINED = {
    "name": "change_price",
    "arguments": {"sku": "SP002", "new_price": 169, "idempotency_key": "k"},
    "outcome": "declined",
}
REFUSED = {
    "name": "change_price",
    "arguments": {"sku": "SP021", "new_price": 99, "idempotency_key": "k"},
    "outcome": "refused",
    "rule": "PRICE_BELOW_COST",
}


def livestream_task(task_id: str, extra: dict[str, Any], approval: str = "decline") -> dict[str, Any]:
    """A livestream task with ``extra`` after its actions and its user answering approvals with ``approval``."""
    task = copy.deepcopy(LIVESTREAM.tasks()[task_id])
    task["evaluation_criteria"]["actions"].append(extra)
    task["user_scenario"]["instructions"]["approval"] = approval
    return task


BAD_OUTCOMES = [
    (
        DECLINED | {"outcome": "maybe"},
        "decline",
        "bad_evaluation_criteria",
        "evaluation_criteria.actions[1]: 'outcome' must be 'declined' or 'refused', got 'maybe'",
    ),
    (
        DECLINED | {"name": "get_product", "arguments": {"sku": "SP002"}},
        "decline",
        "bad_evaluation_criteria",
        "evaluation_criteria.actions[1]: a declined entry must be a write, but 'get_product' only reads",
    ),
    (
        REFUSED | {"name": "get_shop_rules", "arguments": {}},
        "decline",
        "bad_evaluation_criteria",
        "evaluation_criteria.actions[1]: a refused entry must be a write, but 'get_shop_rules' only reads",
    ),
    (
        DECLINED,
        "approve",
        "bad_evaluation_criteria",
        "evaluation_criteria.actions[1]: a declined entry needs a user who declines",
    ),
    (
        REFUSED | {"rule": 5},
        "decline",
        "bad_evaluation_criteria",
        "evaluation_criteria.actions[1]: 'rule' must be a string, got a number",
    ),
    (
        DECLINED | {"rule": "PRICE_CHANGE_NEEDS_APPROVAL"},
        "decline",
        "bad_evaluation_criteria",
        "evaluation_criteria.actions[1]: 'rule' belongs to a refused entry",
    ),
    (
        REFUSED | {"arguments": {"sku": "SP021", "new_price": "cheap", "idempotency_key": "k"}},
        "decline",
        "bad_gold_arguments",
        "evaluation_criteria.actions[1]: the arguments of 'change_price' do not fit its schema",
    ),
]


@pytest.mark.parametrize(("extra", "approval", "reason", "fragment"), BAD_OUTCOMES)
def test_a_bad_declined_or_refused_entry_is_named(extra: dict, approval: str, reason: str, fragment: str) -> None:
    found = task_problem(livestream_task("t08", extra, approval), LIVESTREAM.tools, "livestream")
    assert found is not None and found[0] == reason and fragment in found[1], found


NO_RULE = {k: v for k, v in REFUSED.items() if k != "rule"}


@pytest.mark.parametrize("extra", [DECLINED, REFUSED, NO_RULE], ids=["declined", "refused", "refused-no-rule"])
def test_a_good_entry_is_in_the_script_and_out_of_the_gold(extra: dict) -> None:
    task = livestream_task("t08", extra)
    assert task_problem(task, LIVESTREAM.tools, "livestream") is None
    read = LIVESTREAM.tasks()["t08"]["evaluation_criteria"]["actions"][0]
    assert scripted_actions(task) == [read, extra]  # the gold agent's script, in order
    assert gold_actions(task) == [read]  # what every replay and state comparison reads


# The script (gold actions with the declined and refused entries, in order) replayed as the user answers: a declined
# entry that the harness does not hold for approval, or a refused one that runs, is one no episode can show as the
# task says. Before, each was accepted, and a task that no episode could complete was trained on.
BAD_SCRIPT = [
    (
        DECLINED | {"arguments": {"sku": "SP021", "new_price": 99}},
        "decline",
        "evaluation_criteria.actions[1]: the declined entry 'change_price' comes back HARD_GATE when the script is "
        "replayed, not APPROVAL_REQUIRED",
    ),
    (
        {**NO_RULE, "name": "write_cue_card", "arguments": {"room_id": "R101", "sku": "SP003", "content": "手卡"}},
        "decline",
        "evaluation_criteria.actions[1]: the refused entry 'write_cue_card' comes back OK when the script is replayed",
    ),
    (  # held for approval, approved as this user approves, sent again: it runs
        NO_RULE | {"arguments": {"sku": "SP002", "new_price": 169}},
        "approve",
        "evaluation_criteria.actions[1]: the refused entry 'change_price' comes back OK when the script is replayed",
    ),
]


@pytest.mark.parametrize(("extra", "approval", "fragment"), BAD_SCRIPT, ids=["declined-hard", "refused-ok", "approved"])
def test_an_entry_the_script_replay_contradicts_is_refused(extra: dict, approval: str, fragment: str) -> None:
    task = livestream_task("t08", extra, approval)
    assert task_problem(task, LIVESTREAM.tools, "livestream") is None  # its shape is right: the replay tells
    found = task_verdict("livestream", task).problem
    assert found is not None and found[0] == "bad_outcome_entry" and found[1].startswith(fragment), found


# compare_args names the arguments a call is judged on; a name the tool does not take is None on every call and in the
# gold, so the entry matched any call of the tool. Before, such a typo passed every check.
@pytest.mark.parametrize(
    "extra",
    [
        {"name": "get_product", "arguments": {"sku": "SP004"}, "compare_args": ["skuu"]},
        {**REFUSED, "compare_args": ["sku", "price"]},
    ],
    ids=["read", "refused"],
)
def test_compare_args_must_name_the_tools_parameters(extra: dict) -> None:
    found = task_problem(livestream_task("t08", extra), LIVESTREAM.tools, "livestream")
    bad = extra["compare_args"][-1]
    assert found is not None and found[0] == "bad_evaluation_criteria", found
    assert found[1].startswith(
        f"evaluation_criteria.actions[1]: compare_args names {bad!r}, which {extra['name']!r}"
    ), found


# (splits given, the domain's task ids, the splits placed). A task no split lists is a test task when the first 8 hex
# digits of its id's sha256, over 16**8, fall below 0.2 (held_out): "d" 0.096 and "c" 0.182 are; "a" 0.791 and
# "b" 0.243 are not. A listed task stays where it is listed, whatever its hash; tau2's base (every task) gains it too.
PLACED = [
    ({}, ["a", "b", "c", "d"], {"train": ["a", "b"], "test": ["c", "d"]}),
    ({"train": ["d"], "base": ["d"]}, ["a", "d"], {"train": ["d", "a"], "test": [], "base": ["d", "a"]}),
    ({"test": ["a"]}, ["a", "c"], {"train": [], "test": ["a", "c"]}),
]


@pytest.mark.parametrize(("given", "ids", "expected"), PLACED)
def test_a_task_no_split_lists_is_placed_by_its_ids_hash(given: dict, ids: list[str], expected: dict) -> None:
    assert placed(given, ids) == expected
    assert [held_out(i) for i in "abcd"] == [False, False, True, True]
