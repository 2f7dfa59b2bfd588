"""The episode record: the loop's one contract with the rewards, the exclusion, the metrics and the scorer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.outcomes import Goal
from rewardkit.envs.tasks import Evidence
from rewardkit.envs.termination import Termination

TRANSFER = {"name": "transfer_to_human_agents", "arguments": {"summary": "refund"}, "compare_args": []}
GOAL = Goal(
    state_hash="cd34",
    outputs=("refund",),
    evidence=(Evidence("output", "refund"), Evidence("call", TRANSFER)),
    stray_stops=frozenset(),
    writes=({"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}},),
    task="9f" * 32,
)

FULL = EpisodeRecord(
    termination="user_stop",
    turns=3,
    tool_calls=2,
    tool_errors=1,
    policy_tokens=120,
    state_hash="ab12",
    audit=({"tool": "get_order", "code": "OK", "side": "agent"},),
    agent_said=("Which order?", "Done."),
    transcript="user: hi",
    user_sim="scripted",
    error=None,
    goal=GOAL,
)


def test_the_json_form_reads_back_as_the_same_record() -> None:
    text = json.dumps(FULL.to_json())  # what ms-swift carries between the scheduler and the rewards
    assert EpisodeRecord.read(json.loads(text)) == FULL
    assert EpisodeRecord.read(FULL) is FULL  # a record is passed through as it is


# (a rollout_infos cell, the record read from it)
READ = [
    (None, None),  # an offline row: no live episode
    ("user_stop", None),  # not an object: nothing recorded
    ({}, EpisodeRecord()),  # an object without fields: every field unrecorded
    ({"termination": "user_stop"}, EpisodeRecord(termination="user_stop")),
    ({"turns": 3, "tool_calls": True, "tool_errors": -1}, EpisodeRecord(turns=3)),  # a bool or a negative is no count
    ({"state_hash": 7, "error": ["x"]}, EpisodeRecord()),  # wrong types are not recorded
    ({"audit": "[]", "agent_said": "hi"}, EpisodeRecord()),  # a string is not a list of rows or texts
    ({"audit": [{"tool": "a"}, 3], "agent_said": ["a", 1]}, EpisodeRecord(audit=({"tool": "a"},), agent_said=("a",))),
    ({"goal": GOAL.to_json()}, EpisodeRecord(goal=GOAL)),
]

OK_GOAL = GOAL.to_json()
# A recorded goal off its shape is no goal (the reward then judges the task itself): (what is off, the goal cell)
BAD_GOALS = [
    ("not an object", "cd34"),
    ("no state hash", {**OK_GOAL, "state_hash": None}),
    ("outputs not texts", {**OK_GOAL, "outputs": ["refund", 3]}),
    ("a list missing", {k: v for k, v in OK_GOAL.items() if k != "writes"}),
    ("stray stops a string", {**OK_GOAL, "stray_stops": "transfer_to_human_agents"}),
    ("a write without a name", {**OK_GOAL, "writes": [{"arguments": {}}]}),
    ("a write's arguments a list", {**OK_GOAL, "writes": [{"name": "x", "arguments": []}]}),
    ("compare_args not names", {**OK_GOAL, "writes": [{"name": "x", "compare_args": [1]}]}),
    ("an evidence kind unknown", {**OK_GOAL, "evidence": [{"kind": "maybe", "value": TRANSFER}]}),
    ("an output's value no text", {**OK_GOAL, "evidence": [{"kind": "output", "value": TRANSFER}]}),
    ("an evidence item with a third key", {**OK_GOAL, "evidence": [{"kind": "output", "value": "x", "why": 1}]}),
    ("no task digest", {k: v for k, v in OK_GOAL.items() if k != "task"}),
    # shapes no verdict gives: doing nothing would reach them, or a rate over no criterion
    ("nothing to write or show", {**OK_GOAL, "writes": [], "evidence": []}),
    ("only a refusal to show", {**OK_GOAL, "writes": [], "evidence": [{"kind": "refused", "value": TRANSFER}]}),
    ("an evidence output not said", {**OK_GOAL, "outputs": [], "evidence": [{"kind": "output", "value": "x"}]}),
]


@pytest.mark.parametrize(("what", "cell"), BAD_GOALS, ids=[w for w, _ in BAD_GOALS])
def test_a_recorded_goal_off_its_shape_is_not_recorded(what: str, cell: Any) -> None:
    assert Goal.read(cell) is None
    assert EpisodeRecord.read({"termination": "user_stop", "goal": cell}) == EpisodeRecord(termination="user_stop")


@pytest.mark.parametrize(("cell", "record"), READ)
def test_a_cell_the_loop_did_not_write_is_read_field_by_field(cell: Any, record: EpisodeRecord | None) -> None:
    assert EpisodeRecord.read(cell) == record


# (termination, excluded, natural)
ENDINGS = [
    ("user_stop", False, True),
    ("agent_transfer", False, True),
    ("max_turns", False, False),  # the policy's own ending without credit
    ("user_sim_error", True, False),  # infrastructure: left out of training
    ("env_error", True, False),
    (None, False, False),  # no ending recorded
]


@pytest.mark.parametrize(("termination", "excluded", "natural"), ENDINGS)
def test_an_ending_is_excluded_or_natural_or_neither(termination: str | None, excluded: bool, natural: bool) -> None:
    record = EpisodeRecord(termination=termination)
    assert (record.excluded, record.natural) == (excluded, natural)


def test_an_unstarted_episode_records_its_ending_and_error_and_nothing_else() -> None:
    record = EpisodeRecord.unstarted("the server is unreachable", "llm", Termination.ENV_ERROR)
    assert record.to_json() == {
        "termination": "env_error",
        "turns": 0,
        "tool_calls": 0,
        "tool_errors": 0,
        "policy_tokens": 0,
        "state_hash": None,
        "audit": [],  # recorded as empty: no replay is needed for an episode that never ran
        "agent_said": [],
        "transcript": "",
        "user_sim": "llm",
        "error": "the server is unreachable",
        "user_flags": [],
        "user_sim_fault": None,
        "goal": None,  # nothing judged: the reward judges the row's task itself
    }


def test_the_module_examples_run() -> None:
    import doctest

    import rewardkit.envs.episode_record as module

    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted == 6  # the examples at the top of the module, and why_scored's
