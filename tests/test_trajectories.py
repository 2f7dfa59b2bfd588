"""Synthesis's two pure steps on hand-made data: ``sft_row`` (a trajectory -> an agent-format SFT row)
and ``select`` (which episodes become rows, every other one counted under its reason)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rewardkit.data_builders.trajectories import EMPTY_TURN, MALFORMED, NO_AGENT_TURN, sft_row
from rewardkit.envs import get_domain
from rewardkit.loop.gold import hermes_call
from rewardkit.runs.episodes.synthesis import select

TOOLS_JSON = json.dumps(get_domain("retail").tool_specs(), ensure_ascii=False)
SYSTEM = {"role": "system", "content": "policy"}
USER = {"role": "user", "content": "Where is my order #W1?"}
RESULT = {"role": "tool", "content": '{"order_id": "#W1", "status": "delivered"}'}
ARGS = {"order_id": "#W1"}
CALL_JSON = json.dumps({"name": "get_order_details", "arguments": ARGS})
TOOL_CALL = {"role": "tool_call", "content": CALL_JSON}
OPENAI_CALL = {
    "id": "call_0",
    "type": "function",
    "function": {"name": "get_order_details", "arguments": json.dumps(ARGS)},
}
HERMES = hermes_call("get_order_details", ARGS)
THINK = "<think>\nThe user wants the order status; look it up.\n</think>\n\n"
REPLY = {"role": "assistant", "content": "It was delivered."}


def assistant(content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        ([assistant(HERMES)], [TOOL_CALL]),
        ([assistant("", tool_calls=[OPENAI_CALL])], [TOOL_CALL]),
        ([assistant(None, tool_calls=[OPENAI_CALL])], [TOOL_CALL]),
        # arguments already an object, and a result message carrying the call id (dropped in the row)
        (
            [assistant("", tool_calls=[{**OPENAI_CALL, "function": {"name": "get_order_details", "arguments": ARGS}}])],
            [TOOL_CALL],
        ),
        # text and a call in one message: the text first, as an assistant message, then the call
        ([assistant("Let me check that order.\n" + HERMES)], [assistant("Let me check that order."), TOOL_CALL]),
        ([assistant(THINK + HERMES)], [assistant(THINK.strip()), TOOL_CALL]),
        ([assistant(HERMES + "\n" + HERMES)], [TOOL_CALL, TOOL_CALL]),
    ],
    ids=[
        "hermes",
        "openai",
        "openai-null-content",
        "openai-object-arguments",
        "text-and-call",
        "think-and-call",
        "two-calls",
    ],
)
def test_sft_row_converts_calls(turn: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    result = {**RESULT, "tool_call_id": "call_0"} if "tool_calls" in turn[0] else RESULT
    results = [RESULT] * sum(m["role"] == "tool_call" for m in expected)
    messages = [SYSTEM, USER, *turn, *([result] * len(results)), assistant(THINK + REPLY["content"])]
    row = sft_row(messages, TOOLS_JSON)
    assert row == {
        "messages": [SYSTEM, USER, *expected, *results, assistant(THINK + REPLY["content"])],
        "tools": TOOLS_JSON,
    }


def test_sft_row_without_tools_and_with_structured_tool_content() -> None:
    row = sft_row([SYSTEM, USER, assistant(HERMES), {"role": "tool", "content": {"a": [1]}}, REPLY], None)
    assert row == {"messages": [SYSTEM, USER, TOOL_CALL, {"role": "tool", "content": '{"a": [1]}'}, REPLY]}


def test_sft_row_keeps_non_ascii_arguments_readable() -> None:
    row = sft_row([SYSTEM, USER, assistant(hermes_call("find_user_id_by_name_zip", {"first_name": "Zoë"}))], None)
    assert isinstance(row, dict) and "Zoë" in row["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (assistant('<tool_call>\n{"name": "get_order_details", "arguments": {oops}\n</tool_call>'), MALFORMED),
        (assistant('<tool_call>\n{"arguments": {}}\n</tool_call>'), MALFORMED),  # no name
        (assistant('<tool_call>\n{"name": "x", "arguments": [1]}\n</tool_call>'), MALFORMED),
        (assistant("", tool_calls=[{**OPENAI_CALL, "function": {"name": "x", "arguments": "{not json"}}]), MALFORMED),
        (assistant("", tool_calls="get_order_details"), MALFORMED),
        (assistant("Sure." + HERMES.replace("}}", "}")), MALFORMED),  # one good-looking, one broken block
        (assistant(""), EMPTY_TURN),
        (assistant("  \n "), EMPTY_TURN),
        (assistant(None), EMPTY_TURN),
        (assistant("", tool_calls=[]), EMPTY_TURN),
    ],
)
def test_sft_row_rejects(bad: dict[str, Any], reason: str) -> None:
    # The reason holds wherever the bad turn is: here it follows a good call and its result.
    assert sft_row([SYSTEM, USER, assistant(HERMES), RESULT, bad, REPLY], TOOLS_JSON) == reason


# The simulated user said ###STOP### before the agent spoke: prompts only, nothing to teach.
@pytest.mark.parametrize("messages", [[SYSTEM], [SYSTEM, USER], [USER], [], [SYSTEM, USER, RESULT]])
def test_a_trajectory_without_an_agent_turn_is_rejected(messages: list[dict[str, Any]]) -> None:
    assert sft_row(messages, TOOLS_JSON) == NO_AGENT_TURN
    assert isinstance(sft_row([*messages, REPLY], TOOLS_JSON), dict)  # one assistant turn makes it a row


@pytest.mark.parametrize("role", ["function", "developer", "tool_call", None])
def test_sft_row_unknown_role_raises(role: str | None) -> None:
    with pytest.raises(ValueError, match=f"role {role!r}"):
        sft_row([SYSTEM, USER, {"role": role, "content": "x"}], None)


# --- select ----------------------------------------------------------------------------------------


def convo(n: int, *turns: dict[str, Any]) -> list[dict[str, Any]]:
    return [SYSTEM, {"role": "user", "content": f"request {n}"}, *turns, assistant(f"Done with request {n}.")]


def rec(
    task_id: str,
    trial: int,
    messages: list[dict[str, Any]],
    *,
    status: str = "ok",
    reward: float | None = 1.0,
    termination: str = "user_stop",
) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "trial": trial,
        "status": status,
        "reward": reward,
        "termination": termination,
        "messages": messages,
    }


RECORDS = [
    # task 10: kept once, then the same conversation again, then not something to teach
    rec("10", 1, convo(10, assistant(HERMES), RESULT)),
    rec("10", 0, convo(10, assistant(HERMES), RESULT)),
    rec("10", 2, convo(10, assistant("<tool_call>{broken</tool_call>"), RESULT)),
    rec("10", 3, convo(10, assistant(" "))),
    # task 9: failed, and both kinds of infrastructure error (never counted as failed tasks)
    rec("9", 0, convo(9), reward=0.0, termination="max_turns"),
    rec("9", 1, convo(9), reward=0.0, termination="user_stop"),
    rec("9", 2, convo(9), status="infra_error", reward=None, termination="user_sim_error"),
    rec("9", 3, convo(9), status="infra_error", reward=None, termination="agent_error"),
    # task 2: one kept episode, after the higher-numbered tasks in the input
    rec("2", 0, convo(2)),
    # a non-numeric id sorts after every numeric one
    rec("x", 0, convo(99, assistant(HERMES), RESULT)),
]


NO_FAULT = {"agent": 0, "user": 0, "tool": 0, "none": 0}


def test_select_counts_every_reason_under_its_own_name() -> None:
    rows, report = select(RECORDS, TOOLS_JSON)
    assert report["read"] == len(RECORDS) == report["kept"] + sum(report["rejected"].values())
    assert report["kept"] == 3
    assert report["rejected"] == {
        "agent_error": 1,
        "duplicate": 1,
        "empty_assistant_turn": 1,
        "malformed_tool_call": 1,
        "task_failed": 2,
        "user_sim_error": 1,
    }
    assert report["terminations"] == {"agent_error": 1, "max_turns": 1, "user_sim_error": 1, "user_stop": 7}
    # whose fault: agent 5 (agent_error, task_failed 2, malformed, empty) + user 1 + none 1 (duplicate) = 7 rejected
    assert report["faults"] == {"agent": 5, "user": 1, "tool": 0, "none": 1}
    assert report["tasks_with_a_kept_episode"] == 3
    assert report["per_task"] == {
        "2": {"attempted": 1, "kept": 1, "rejected": {}, "terminations": {"user_stop": 1}, "faults": NO_FAULT},
        "9": {
            "attempted": 4,
            "kept": 0,
            "rejected": {"agent_error": 1, "task_failed": 2, "user_sim_error": 1},
            "terminations": {"agent_error": 1, "max_turns": 1, "user_sim_error": 1, "user_stop": 1},
            # agent 3 (agent_error, task_failed 2) + user 1 (user_sim_error) = the 4 rejected
            "faults": {"agent": 3, "user": 1, "tool": 0, "none": 0},
        },
        "10": {
            "attempted": 4,
            "kept": 1,
            "rejected": {"duplicate": 1, "empty_assistant_turn": 1, "malformed_tool_call": 1},
            "terminations": {"user_stop": 4},
            # agent 2 (malformed, empty turn) + none 1 (duplicate) = the 3 rejected
            "faults": {"agent": 2, "user": 0, "tool": 0, "none": 1},
        },
        "x": {"attempted": 1, "kept": 1, "rejected": {}, "terminations": {"user_stop": 1}, "faults": NO_FAULT},
    }
    # Rows in task order (numeric ids numerically), each the sft_row of its episode.
    assert rows == [
        sft_row(convo(2), TOOLS_JSON),
        sft_row(RECORDS[0]["messages"], TOOLS_JSON),
        sft_row(RECORDS[-1]["messages"], TOOLS_JSON),
    ]
    assert list(report["per_task"]) == ["2", "9", "10", "x"]


def test_select_keeps_the_first_trial_of_a_duplicate() -> None:
    first = convo(1, assistant(HERMES), RESULT)
    records = [rec("1", 1, first), rec("1", 0, first), rec("1", 2, convo(1))]
    rows, report = select(records, None)
    assert report["per_task"]["1"]["kept"] == 2 and report["rejected"] == {"duplicate": 1}
    assert rows == [sft_row(first, None), sft_row(convo(1), None)] and "tools" not in rows[0]


def test_select_of_nothing() -> None:
    rows, report = select([], TOOLS_JSON)
    assert rows == [] and report["read"] == report["kept"] == 0 and report["per_task"] == {}


def test_select_counts_episodes_without_an_agent_turn() -> None:
    # Both scored 1.0 (a task with nothing to change, and a user who left at once): still not rows.
    records = [rec("1", 0, [SYSTEM]), rec("1", 1, [SYSTEM, USER]), rec("2", 0, convo(2))]
    rows, report = select(records, None)
    # read 3 = kept 1 + rejected 2
    assert (report["read"], report["kept"], report["rejected"]) == (3, 1, {"no_agent_turn": 2})
    assert report["per_task"]["1"]["rejected"] == {"no_agent_turn": 2} and rows == [sft_row(convo(2), None)]
