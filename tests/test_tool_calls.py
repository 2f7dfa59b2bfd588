from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewardkit.envs.tool_calls import ToolCall, tool_calls, user_facing_texts

CANCEL = {"order_id": "#W2611340", "reason": "no longer needed"}


class TestToolCalls:
    def test_hermes_blocks_several_per_message(self) -> None:
        content = (
            "Let me check.\n<tool_call>\n"
            + json.dumps({"name": "get_order_details", "arguments": {"order_id": "#W2611340"}})
            + "\n</tool_call>\n<tool_call>"
            + json.dumps({"name": "cancel_pending_order", "arguments": CANCEL})
            + "</tool_call>"
        )
        calls = tool_calls(
            [{"role": "user", "content": "<tool_call>{}</tool_call>"}, {"role": "assistant", "content": content}]
        )
        assert calls == [
            ToolCall("get_order_details", {"order_id": "#W2611340"}),
            ToolCall("cancel_pending_order", CANCEL),
        ]

    def test_openai_tool_calls_with_string_or_object_arguments(self) -> None:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"type": "function", "function": {"name": "cancel_pending_order", "arguments": json.dumps(CANCEL)}},
                {"type": "function", "function": {"name": "list_all_product_types", "arguments": {}}},
            ],
        }
        assert tool_calls([message]) == [
            ToolCall("cancel_pending_order", CANCEL),
            ToolCall("list_all_product_types", {}),
        ]

    @pytest.mark.parametrize(
        ("content", "error"),
        [
            ("<tool_call>{not json</tool_call>", "not valid JSON"),
            ('<tool_call>{"arguments": {}}</tool_call>', "string 'name'"),
            ('<tool_call>{"name": "calculate", "arguments": "[1]"}</tool_call>', "JSON object"),
            ('<tool_call>{"name": "calculate", "arguments": "{bad"}</tool_call>', "not valid JSON"),
        ],
    )
    def test_undecodable_calls_are_kept_with_an_error(self, content: str, error: str) -> None:
        (call,) = tool_calls([{"role": "assistant", "content": content}])
        assert call.error is not None and error in call.error
        assert call.arguments == {}

    @pytest.mark.parametrize(
        "arguments",
        [
            {1: "a"},  # json.dumps writes the key as "1": the tool would get {1: ...}, the log {"1": ...}
            {None: 1, True: 2},  # "null" and "true" as keys
            {"order": {2: "x"}},  # nested too
            {"a": (1, 2)},  # a tuple is written as a list
        ],
    )
    def test_object_arguments_that_are_not_json_as_they_are_keep_an_error(self, arguments: dict) -> None:
        # An engine (or a harness) may hand arguments over as an object already: what the tool receives must be what
        # the harness stores and hashes, so an object whose JSON reads back as another object is refused, not run.
        message = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": arguments}}]}
        (call,) = tool_calls([message])
        assert call.error is not None and "JSON object" in call.error and call.arguments == {}

    def test_user_facing_texts_drop_tool_blocks_and_tool_turns(self) -> None:
        messages = [
            {"role": "assistant", "content": 'Your refund is 536.65.<tool_call>{"name": "x"}</tool_call>'},
            {"role": "tool", "content": "secret tool output"},
        ]
        text = " ".join(user_facing_texts(messages))
        assert "536.65" in text and "tool_call" not in text and "secret" not in text

    def test_ms_swift_tool_call_messages(self) -> None:
        messages = [
            {"role": "tool_call", "content": json.dumps({"name": "cancel_pending_order", "arguments": CANCEL})},
            {"role": "tool_response", "content": "{}"},
            {"role": "tool_call", "content": "{oops"},
        ]
        calls = tool_calls(messages)
        assert calls[0] == ToolCall("cancel_pending_order", CANCEL)
        assert calls[1].error is not None and "not valid JSON" in calls[1].error

    def test_user_facing_texts_keep_messages_apart(self) -> None:
        messages = [
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "two<tool_call>{}</tool_call>"},
        ]
        assert [t.strip() for t in user_facing_texts(messages)] == ["one", "two"]


# The blocks are read in one pass with str.find. The reading is the non-greedy regex's, which this checks it against on
# texts made of openings, closings, calls and noise (small, since the regex is quadratic in unclosed openings).
REGEX_READING = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
PIECES = st.sampled_from(["<tool_call>", "</tool_call>", '{"name": "f", "arguments": {}}', "<tool_", "x", "\n", ""])


class TestHermesReading:
    @given(st.lists(PIECES, max_size=12).map("".join))
    def test_same_blocks_and_text_as_the_non_greedy_regex(self, text: str) -> None:
        message = {"role": "assistant", "content": text}
        bodies = REGEX_READING.findall(text)
        assert len(tool_calls([message])) == len(bodies)
        assert user_facing_texts([message]) == [REGEX_READING.sub(" ", text)]

    @pytest.mark.parametrize(
        "text",
        [
            '<tool_call>{"name": ' * 50_000,  # 1 MiB of openings never closed: the regex took minutes
            "<tool_call>" * 100_000 + "</tool_call>",  # one block whose body holds 99,999 openings
        ],
    )
    def test_a_megabyte_of_openings_reads_as_what_it_closes(self, text: str) -> None:
        # Linear: the whole text is read once (the backtracking probe of every pattern lives in test_regexes.py).
        message = {"role": "assistant", "content": text}
        assert len(tool_calls([message])) == text.count("</tool_call>")
        assert user_facing_texts([message]) == [text if "</tool_call>" not in text else " "]
