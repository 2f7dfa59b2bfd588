"""Model-shaped garbage in ``messages`` scores 0.0 and never raises (the reward side).

``messages`` is what the policy wrote. Whatever its tool calls look like, ``tool_calls`` returns
calls (malformed ones with ``error`` set, which the environment answers with SCHEMA_VIOLATION) and the
tau2 rewards score. Only the dataset's own cells (task, domain) raise: see test_dataset_validation.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.envs import get_domain
from rewardkit.envs.retail.domain import tasks
from rewardkit.envs.tool_calls import tool_calls, user_facing_texts
from rewardkit.rewards import TaskCompletion, TaskCompletionRate

TASK = tasks()["0"]  # its gold exchanges two items: doing nothing (or garbage) cannot match it
GOLD = TASK["evaluation_criteria"]["actions"]
EXCHANGE = GOLD[-1]
TOOLS = sorted(get_domain("retail").tools)
REWARDS = [TaskCompletion(), TaskCompletionRate()]


def deep(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def assistant(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", **fields}


def openai(function: Any) -> dict[str, Any]:
    return assistant(tool_calls=[{"id": "c1", "type": "function", "function": function}])


def hermes(body: str) -> dict[str, Any]:
    return assistant(content=f"<tool_call>{body}</tool_call>")


EXCHANGE_ARGS = EXCHANGE["arguments"]
GARBAGE: list[tuple[str, Any]] = [
    # tool_calls that is not a list: iterating "abc" used to give .get on a str (AttributeError).
    ("tool_calls is a string", [assistant(tool_calls="abc")]),
    ("tool_calls is one object", [assistant(tool_calls={"function": {"name": EXCHANGE["name"]}})]),
    ("tool_calls is a number", [assistant(tool_calls=7)]),
    # A function of null used to be .get on None.
    ("function is null", [openai(None)]),
    ("function is a list", [openai([EXCHANGE["name"]])]),
    ("tool call items not objects", [assistant(tool_calls=[None, 3, "x", [1]])]),
    ("name not a string", [openai({"name": 5, "arguments": "{}"})]),
    # Arguments of the wrong type, each an error call: the exchange never runs.
    ("arguments a number", [openai({"name": EXCHANGE["name"], "arguments": 5})]),
    ("arguments a list", [openai({"name": EXCHANGE["name"], "arguments": [EXCHANGE_ARGS]})]),
    ("arguments JSON of a list", [openai({"name": EXCHANGE["name"], "arguments": json.dumps([EXCHANGE_ARGS])})]),
    ("arguments not JSON", [openai({"name": EXCHANGE["name"], "arguments": "{order_id: 1"})]),
    # NaN is not JSON (Python's json accepts it): refused before it could reach a tool.
    ("arguments with NaN", [openai({"name": EXCHANGE["name"], "arguments": '{"order_id": NaN}'})]),
    ("arguments object with nan", [openai({"name": EXCHANGE["name"], "arguments": {**EXCHANGE_ARGS, "x": math.nan}})]),
    # Deep nesting: json.loads raises RecursionError, a nested object cannot be serialised for the audit.
    ("arguments nested 100k deep", [openai({"name": EXCHANGE["name"], "arguments": "[" * 100_000})]),
    ("arguments object nested 5k deep", [openai({"name": EXCHANGE["name"], "arguments": deep(5000)})]),
    ("integer of 5000 digits", [openai({"name": EXCHANGE["name"], "arguments": '{"n": ' + "9" * 5000 + "}"})]),
    ("lone surrogate", [openai({"name": EXCHANGE["name"], "arguments": {**EXCHANGE_ARGS, "order_id": "\ud800"}})]),
    ("wrong argument types", [openai({"name": EXCHANGE["name"], "arguments": {**EXCHANGE_ARGS, "item_ids": 1}})]),
    ("unknown tool", [openai({"name": "drop_all_tables", "arguments": {}})]),
    # Hermes blocks.
    ("hermes body a list", [hermes("[1, 2]")]),
    ("hermes body not JSON", [hermes("{'name': 'x'}")]),
    ("hermes unclosed", [assistant(content='<tool_call>{"name": "get_order_details"')]),
    ("hermes arguments a string", [hermes(json.dumps({"name": EXCHANGE["name"], "arguments": "all"}))]),
    # Messages that are not objects, contents that are not strings, roles that are not strings.
    ("messages not objects", [None, 3, "assistant", ["assistant", "hi"], True]),
    ("content a list", [assistant(content=["<tool_call>", json.dumps(EXCHANGE)])]),
    ("content an object", [assistant(content={"name": EXCHANGE["name"], "arguments": EXCHANGE_ARGS})]),
    ("content token ids", [assistant(content=[151644, 77091])]),
    ("tool_call message, object content", [{"role": "tool_call", "content": EXCHANGE}]),
    ("tool_call message, null content", [{"role": "tool_call", "content": None}]),
    ("role a list", [{"role": ["assistant"], "content": "hi"}]),
    ("no role", [{"content": json.dumps(EXCHANGE)}]),
    ("empty message", [{}]),
    ("empty conversation", []),
]


class TestMalformedMessages:
    @pytest.mark.parametrize(("why", "messages"), GARBAGE, ids=[g[0] for g in GARBAGE])
    @pytest.mark.parametrize("reward", REWARDS, ids=lambda r: type(r).__name__)
    def test_scores_zero_and_never_raises(self, reward: Any, why: str, messages: list[Any]) -> None:
        assert reward(["x"], messages=[messages], task=[TASK], domain=["retail"]) == [0.0]

    @pytest.mark.parametrize(("why", "messages"), GARBAGE, ids=[g[0] for g in GARBAGE])
    def test_parsers_return_error_calls_or_skip(self, why: str, messages: list[Any]) -> None:
        for call in tool_calls(messages):
            assert isinstance(call.name, str) and (call.error is not None or call.name in TOOLS or call.name)
            json.dumps(call.arguments, sort_keys=True, allow_nan=False)  # what the audit stores must serialise
        assert all(isinstance(t, str) for t in user_facing_texts(messages))

    @pytest.mark.parametrize("reward", REWARDS, ids=lambda r: type(r).__name__)
    def test_garbage_beside_the_right_calls_costs_nothing(self, reward: Any) -> None:
        # Malformed calls are failed calls: an episode that also makes every gold call still completes.
        junk = [message for _, messages in GARBAGE for message in messages]
        right = [openai({"name": a["name"], "arguments": json.dumps(a["arguments"])}) for a in GOLD]
        assert reward(["x"], messages=[[*junk, *right]], task=[TASK], domain=["retail"]) == [1.0]

    def test_error_calls_say_why(self) -> None:
        (call,) = tool_calls([assistant(tool_calls="abc")])
        assert call.error == "tool_calls must be a list of tool-call objects; got str"
        (call,) = tool_calls([openai(None)])
        assert call.error == "a tool call must be an object whose 'function' is an object"


# Arbitrary JSON, with the shapes a policy produces mixed in so that the parsers' branches are reached.
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
NAMES = st.sampled_from([*TOOLS, "", "nope"]) | JSON
ARGUMENTS = (
    JSON
    | JSON.map(lambda v: json.dumps(v))
    | st.dictionaries(st.sampled_from(sorted({k for a in GOLD for k in a["arguments"]})), JSON, max_size=4)
    | st.just(EXCHANGE_ARGS)
)
FUNCTION = st.fixed_dictionaries({"name": NAMES, "arguments": ARGUMENTS}) | JSON
OPENAI_CALL = st.fixed_dictionaries({"type": st.just("function"), "function": FUNCTION}) | JSON
HERMES = st.builds(lambda f: f"<tool_call>{json.dumps(f, default=str)}</tool_call>", FUNCTION) | st.text().map(
    lambda t: f"<tool_call>{t}</tool_call>"
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "tool_call", "user", "tool", "system"]) | JSON},
    optional={"content": st.text(max_size=40) | HERMES | JSON, "tool_calls": st.lists(OPENAI_CALL, max_size=3) | JSON},
)
MESSAGES = st.lists(MESSAGE | JSON, max_size=6)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=MESSAGES)
def test_any_json_shaped_messages_score_in_range(messages: list[Any]) -> None:
    for reward in REWARDS:
        (score,) = reward(["x"], messages=[messages], task=[TASK], domain=["retail"])
        assert score is not None and math.isfinite(score) and 0.0 <= score <= 1.0
