"""``rewardkit lint tokens --model DIR --data FILE``: where the loss falls, with ms-swift's real template.

The rows are `rewardkit synth agent` output (agent format: tool_call and tool messages, a tools column) and a user's
own messages-format row (Hermes calls inside assistant text); the model is the tiny offline Qwen3, whose ms-swift
template is qwen3 with the hermes agent template. Run in this process through ``rewardkit.cli.main``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rewardkit.files.jsonl import read_jsonl

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 whose tokenizer knows the retail policy and tools (a synthesised row is ~9k tokens)."""
    from rewardkit.envs import get_domain
    from rewardkit.pipelines.tiny_model import build_tiny_model

    domain = get_domain("retail")
    corpus = [domain.policy() + json.dumps(domain.tool_specs(), ensure_ascii=False)]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", corpus, max_positions=16384)


@pytest.fixture(scope="module")
def synth_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    from rewardkit.cli import main

    out = tmp_path_factory.mktemp("synth") / "sft.jsonl"
    assert (
        main(
            [
                "synth",
                "agent",
                "--agent",
                "gold",
                "--user",
                "scripted",
                "--tasks",
                "0,1",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = read_jsonl(out)
    assert len(rows) == 2 and all(any(m["role"] == "tool" for m in r["messages"]) for r in rows)
    return rows


def lint(capsys: pytest.CaptureFixture[str], tmp_path: Path, model: Path, rows: list[dict], *args: str):
    from rewardkit.cli import main

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    capsys.readouterr()
    code = main(
        ["lint", "tokens", "--model", str(model), "--data", str(data), "--json", str(tmp_path / "r.json"), *args]
    )
    out, _ = capsys.readouterr()
    return code, json.loads((tmp_path / "r.json").read_text(encoding="utf-8")), out


def moved_tool_result(row: dict) -> dict:
    """The row with its first tool result turned into an assistant message (trained as if the agent said it)."""
    row = copy.deepcopy(row)
    first = next(i for i, m in enumerate(row["messages"]) if m["role"] == "tool")
    row["messages"][first]["role"] = "assistant"
    return row


MESSAGES_ROW = {  # a user's own messages-format row: the Hermes call is assistant text, the result a tool message
    "messages": [
        {"role": "system", "content": "You are a retail agent."},
        {"role": "user", "content": "Where is my order #W2378156?"},
        {
            "role": "assistant",
            "content": '<tool_call>\n{"name": "get_order_details", "arguments": '
            '{"order_id": "#W2378156"}}\n</tool_call>',
        },
        {"role": "tool", "content": '{"order_id": "#W2378156", "status": "delivered"}'},
        {"role": "assistant", "content": "It was delivered."},
    ]
}
TWO_ROUNDS = {
    "messages": [
        *MESSAGES_ROW["messages"],
        {"role": "user", "content": "Thanks. And my address?"},
        {"role": "assistant", "content": "It is on file."},
    ]
}


@pytest.mark.parametrize(
    ("case", "loss_scale", "code", "rules"),
    [
        ("synthesised", "default", 0, set()),  # loss on every agent turn, nothing else
        ("messages", "default", 0, set()),
        ("moved", "default", 1, {"no_tool_result"}),  # the tool result trained as the agent's
        # 'all' trains the prompt too: system, user and tool-result tokens carry loss.
        ("synthesised", "all", 1, {"system_loss", "user_loss", "tool_loss"}),
        # 'last_round' trains the last round only (after the last user turn): the first round's agent turn carries
        # none.
        ("two_rounds", "last_round", 1, {"agent_no_loss"}),
    ],
)
def test_where_the_loss_falls(
    tiny_model: Path,
    synth_rows: list[dict],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    loss_scale: str,
    code: int,
    rules: set[str],
) -> None:
    rows = {
        "synthesised": synth_rows,
        "messages": [MESSAGES_ROW],
        "two_rounds": [TWO_ROUNDS],
        "moved": [synth_rows[0], moved_tool_result(synth_rows[1])],
    }[case]
    got, report, out = lint(capsys, tmp_path, tiny_model, rows, "--loss-scale", loss_scale)
    assert got == code, report["problems"][:3]
    assert {p["rule"] for p in report["problems"]} == rules
    if case == "two_rounds":  # messages 2-4 (call, result, reply) are round one; its agent turns are 2 and 4
        assert sorted(p["message"] for p in report["problems"]) == [2, 4]
    if case == "moved":  # only the second row was changed, and the problem names the message that follows the call
        assert report["failed_rows"] == [1]
        (problem,) = report["problems"]
        assert problem["message"] == 3 and "tool result moved into an assistant turn" in problem["detail"]
    if code == 0:
        tokens = report["tokens"]
        assert tokens["agent"]["loss"] > 0
        assert all(tokens[role]["loss"] == 0 for role in ("system", "user", "tool") if role in tokens)
        assert tokens["user"]["tokens"] > 0 and "all rows pass" in out


def test_show_marks_the_loss_tokens(
    tiny_model: Path, synth_rows: list[dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, out = lint(capsys, tmp_path, tiny_model, [MESSAGES_ROW], "--show", "1")
    assert code == 0
    # The call and the reply are trained (between the marks); the user's question and the tool result are not.
    assert '⟦<think>\n\n</think>\n\n<tool_call>\n{"name": "get_order_details"' in out
    assert "It was delivered.<|im_end|>" in out and "⟦Where is my order" not in out
    trained = "".join(part.split("⟧")[0] for part in out.split("⟦")[1:])
    assert "delivered" in trained and "Where is my order" not in trained and '"status"' not in trained


CALL = '{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}'
ECHO = [  # the user's second message repeats the agent's reply
    {"role": "user", "content": "Say yes"},
    {"role": "assistant", "content": "yes"},
    {"role": "user", "content": "yes"},
    {"role": "assistant", "content": "ok"},
]


def called(result: str) -> list[dict]:
    """A user question, the agent's call of get_order_details, the tool's ``result`` and the agent's answer."""
    return [
        {"role": "user", "content": "Where is my order?"},
        {"role": "tool_call", "content": CALL},
        {"role": "tool", "content": result},
        {"role": "assistant", "content": "It was delivered."},
    ]


# Each token is the message's that the encoder put it in, never found by its text. Before, the text of each
# context message was searched for in the decoded row, from the end of the previous one.
@pytest.mark.parametrize(
    ("messages", "loss_scale", "code", "rules", "context"),
    [
        # The second "yes" was found in the agent's reply (trained): user_loss on message 2. Now the user tokens
        # are "Say yes" and "yes", each as many as it encodes to alone, none with loss.
        (ECHO, "default", 0, set(), {"user": ["Say yes", "yes"]}),
        # 'all' trains both user messages, and each is named for its own tokens.
        (ECHO, "all", 1, {("user_loss", 0), ("user_loss", 2)}, {"user": ["Say yes", "yes"]}),
        # The result repeats the call's argument: it was found inside the (trained) call, a false tool_loss.
        (called("#W2378156"), "default", 0, set(), {"user": ["Where is my order?"], "tool": ["#W2378156"]}),
        # A one-letter result: "m" was found inside "<|im_start|>" of the call's header, the call's turn
        # then looked empty (a false agent_no_loss). Now the tool message is its one token.
        (called("m"), "default", 0, set(), {"user": ["Where is my order?"], "tool": ["m"]}),
        # No assistant turn: it passed with 0 loss tokens. Nothing in it would be trained: no_agent_turn.
        (ECHO[:1], "default", 1, {("no_agent_turn", None)}, {"user": ["Say yes"]}),
    ],
)
def test_each_token_is_in_its_own_message(
    tiny_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    messages: list[dict],
    loss_scale: str,
    code: int,
    rules: set[tuple[str, int | None]],
    context: dict[str, list[str]],
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    got, report, _ = lint(capsys, tmp_path, tiny_model, [{"messages": messages}], "--loss-scale", loss_scale)
    assert got == code and {(p["rule"], p["message"]) for p in report["problems"]} == rules, report["problems"]
    for role, texts in context.items():
        # Each message's tokens are as many as its content encodes to alone (here nothing fuses with the template).
        expected = sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)
        assert report["tokens"][role]["tokens"] == expected, (role, report["tokens"])
    assert ("agent" in report["tokens"]) == any(m["role"] != "user" for m in messages)


def test_a_row_holding_every_canary_is_unattributed(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rewardkit.lint.attribution import CANARIES

    # Every canary letter occurs in the row, so none can stand in for its contents: the row is not guessed at but
    # reported, and all its tokens are counted as unattributed.
    row = {"messages": [{"role": "user", "content": "Letters: " + "".join(CANARIES)}, *ECHO[1:2]]}
    got, report, _ = lint(capsys, tmp_path, tiny_model, [row])
    assert got == 1 and [p["rule"] for p in report["problems"]] == ["unattributed"], report["problems"]
    assert "every canary letter" in report["problems"][0]["detail"] and list(report["tokens"]) == ["unattributed"]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "The status of an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]
OTHER_TOOLS = [{"type": "function", "function": {"name": "cancel_order", "parameters": {"type": "object"}}}]


# Two rows linted together count exactly the tokens of each linted alone. Before: a file whose first row had no
# tools lost every later row's tools (the dataset took its columns from the first row); a tools list in one row and
# JSON text in another was an ArrowInvalid traceback; two lists of different tool specs were merged by Arrow, each
# spec getting the other's missing fields as nulls ("description": null in OTHER_TOOLS), so more tokens.
@pytest.mark.parametrize(
    ("first", "second"),
    [(None, TOOLS), (TOOLS, json.dumps(OTHER_TOOLS)), (TOOLS, OTHER_TOOLS)],
    ids=["no-tools-then-list", "list-then-text", "two-lists"],
)
def test_each_row_keeps_its_own_tools(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], first: object, second: object
) -> None:
    rows = [{**MESSAGES_ROW, **({} if tools is None else {"tools": tools})} for tools in (first, second)]
    code, together, _ = lint(capsys, tmp_path, tiny_model, rows)
    alone = [lint(capsys, tmp_path, tiny_model, [row])[1]["tokens"] for row in rows]
    assert code == 0, together["problems"]
    for role, cell in together["tokens"].items():
        assert cell["tokens"] == sum(a.get(role, {"tokens": 0})["tokens"] for a in alone), role
