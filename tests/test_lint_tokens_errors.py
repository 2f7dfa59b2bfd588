"""``rewardkit lint tokens``: a bad ``--data`` row or a bad template flag is a usage error, exit 2 with one line.

Each case runs the real CLI (``rewardkit.cli.main``) on a tiny offline Qwen3 and ms-swift's real template. The
data file holds a good row on line 1, a blank line 2 and the case's row on line 3, so ``rows.jsonl:3`` is the
file's own 1-based line number (blank lines counted), not the row's index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.compat

GOOD = {"messages": [{"role": "user", "content": "Where is my order?"}, {"role": "assistant", "content": "Here."}]}


def with_message(i: int, **fields: Any) -> dict[str, Any]:
    """GOOD with ``fields`` set on message ``i`` (a field of None is removed)."""
    messages = [dict(m) for m in GOOD["messages"]]
    messages[i].update(fields)
    messages[i] = {k: v for k, v in messages[i].items() if v is not None}
    return {"messages": messages}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rewardkit.pipelines.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", ["Where is my order? Here. You are an agent."])


def lint(capsys: pytest.CaptureFixture[str], tmp_path: Path, model: Path, third: Any, *flags: str) -> tuple[int, str]:
    """Exit code and stderr of ``lint tokens`` on GOOD, a blank line and ``third`` (a row, or raw text)."""
    from rewardkit.cli import main

    data = tmp_path / "rows.jsonl"
    line = third if isinstance(third, str) else json.dumps(third)
    data.write_text(json.dumps(GOOD) + "\n\n" + line + "\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["lint", "tokens", "--model", str(model), "--data", str(data), *flags])
    return code, capsys.readouterr().err


def one_line(code: int, err: str) -> str:
    """The usage error's one line (exit 2, no traceback)."""
    assert code == 2 and "Traceback" not in err, (code, err)
    assert err.count("\n") == 1 and err.startswith("rewardkit lint: "), err
    return err


TOOL = {"type": "function", "function": {"name": "get_order", "parameters": {"type": "object", "properties": {}}}}
MIXED_KWARGS = "\n".join(json.dumps({**GOOD, "chat_template_kwargs": {"enable_thinking": v}}) for v in (True, "x"))


# Before: ms-swift's preprocessor asserted (AssertionError traceback) or Arrow failed (ArrowInvalid traceback), or
# the row was dropped (every later row reported under the wrong number) or passed with the bad part ignored.
@pytest.mark.parametrize(
    ("third", "expected"),
    [
        # An unknown role: ms-swift's preprocessor took "bott" for nothing and the row went on with it.
        (with_message(0, role="bott"), ['rows.jsonl:3: messages[0].role "bott" is not a role ms-swift knows', "human"]),
        (with_message(0, role=None), ["rows.jsonl:3: messages[0] has no 'role'; use one of system, user"]),
        # Content null: ms-swift's `assert content is not None` (a traceback).
        (with_message(1, content=None), ["rows.jsonl:3: messages[1] (assistant) has no 'content'"]),
        ({"messages": [{"role": "user", "content": None}]}, ["messages[0].content must be a string", "got null"]),
        # Content parts beside string content: ArrowInvalid "cannot mix list and non-list" (a traceback).
        (with_message(0, content=[{"type": "text", "text": "hi"}]), ["got a list; join its text parts"]),
        (with_message(0, content=7), ["rows.jsonl:3: messages[0].content must be a string", "got a number (7)"]),
        # messages as a string: ms-swift's ast.literal_eval of it (ValueError traceback).
        ({"messages": "hello"}, ["rows.jsonl:3: 'messages' must be a non-empty list", "got a string ('hello')"]),
        # No messages: the row was dropped by ms-swift (later rows renumbered), or alone an AssertionError.
        ({"prompt": "hi", "completion": "yo"}, ["rows.jsonl:3: no 'messages' column", "user and an assistant"]),
        ({"messages": []}, ["rows.jsonl:3: 'messages' must be a non-empty list", "got an empty list"]),
        ({"messages": ["hi"]}, ["rows.jsonl:3: messages[0] must be an object with 'role' and 'content'"]),
        (with_message(1, loss="no"), ["rows.jsonl:3: messages[1].loss must be true, false or null, got a string"]),
        (with_message(1, loss_scale="x"), ["rows.jsonl:3: messages[1].loss_scale must be a number or null"]),
        # tools not JSON: every such row an encode_error ("AssertionError: tool: None"); now the column is named.
        ({**GOOD, "tools": "notjson"}, ["rows.jsonl:3: 'tools' is text but not JSON"]),
        ({**GOOD, "tools": [TOOL, 1]}, ["rows.jsonl:3: tools[1] must be a tool object", "got a number (1)"]),
        ({**GOOD, "tools": 5}, ["rows.jsonl:3: 'tools' must be a list of tool objects", "got a number (5)"]),
        ({**GOOD, "system": 5}, ["rows.jsonl:3: 'system' must be a string, got a number (5)"]),
        ({**GOOD, "chat_template_kwargs": []}, ["rows.jsonl:3: 'chat_template_kwargs' must be an object"]),
        # Line 3 a boolean, line 4 a string in one field of a column ms-swift reads: Arrow refuses the rows (was a
        # traceback); the one line says who refuses them and why.
        (MIXED_KWARGS, ["ms-swift's preprocessor refuses the rows (ArrowInvalid", "to boolean"]),
    ],
)
def test_a_bad_row_is_one_line_naming_its_line(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], third: Any, expected: list[str]
) -> None:
    err = one_line(*lint(capsys, tmp_path, model, third))
    assert all(part in err for part in expected), err


# Before: --loss-scale and --agent-template were not checked, so every row failed as an encode_error (exit 1; exit 0
# where no row had tools, as the agent template is only read for tools); --max-length 0 made every row "longer than
# max_length" (exit 1); --template nosuch was ms-swift's ValueError listing all 230 types (a traceback).
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--template", "nosuch"],
            ["--template 'nosuch': not an ms-swift template type; e.g. qwen3", "TEMPLATE_MAPPING"],
        ),
        (["--template", "qwen33"], ["--template 'qwen33': not an ms-swift template type; did you mean qwen3"]),
        (["--agent-template", "nosuch"], ["--agent-template 'nosuch': not an ms-swift agent template", "hermes"]),
        (["--loss-scale", "nosuch"], ["--loss-scale 'nosuch': not an ms-swift loss_scale", "last_round", "hermes"]),
        (["--loss-scale", "last_round+nosuch"], ["--loss-scale 'last_round+nosuch': not an ms-swift loss_scale"]),
        (["--loss-scale", "default+"], ["--loss-scale 'default+': not an ms-swift loss_scale"]),  # an empty type
        (["--max-length", "0"], ["--max-length must be a positive number of tokens, got 0"]),
        (["--max-length", "-3"], ["--max-length must be a positive number of tokens, got -3"]),
    ],
)
def test_a_bad_template_flag_is_one_line(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: list[str]
) -> None:
    err = one_line(*lint(capsys, tmp_path, model, GOOD, *flags))
    assert all(part in err for part in expected), err


@pytest.mark.parametrize(
    "flags",
    [
        ["--loss-scale", "last_round+hermes"],  # a strategy and a type: ms-swift's own syntax
        ["--agent-template", "hermes", "--template", "qwen3", "--max-length", "64"],
    ],
)
def test_good_template_flags_pass(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    code, err = lint(capsys, tmp_path, model, GOOD, *flags)
    assert code == 0, err
