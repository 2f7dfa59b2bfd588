"""Builders reject every bad record with a reason naming the field; --on-error skip skips them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import E5
from conftest import tau2_task as task

from rewardkit.cli import main
from rewardkit.data_builders._io import BuildError
from rewardkit.data_builders.planning._common import InputSpec
from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
from rewardkit.data_builders.planning.sft import SftOptions, build_sft
from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo

STEP = {"专家": "数据分析专家", "处理问题": ["查看经营周报"]}
THINK = "用户想查看经营周报，这属于数据分析专家的职责，问题明确不需要拆解。"
ANSWER = {"补全后的问题": "查看经营周报", "plan": [STEP]}
OUTPUT = f"<think>\n{THINK}\n</think>\n\n<answer>\n{json.dumps(ANSWER, ensure_ascii=False)}\n</answer>"
ANNOTATED = {
    "id": "a",
    "query": "查看经营周报",
    "history": [],
    "experts": E5,
    "rewrite": "查看经营周报",
    "plan": [STEP],
}
TEACHER = {"id": "t", "query": "查看经营周报", "history": [], "experts": E5, "output": OUTPUT}
BUILDERS = {
    "grpo": (ANNOTATED, lambda specs, on_error: build_grpo(specs, GrpoOptions(on_error=on_error))),
    "sft": (TEACHER, lambda specs, on_error: build_sft(specs, SftOptions(on_error=on_error))),
}


def line(record: Any) -> bytes:
    return (record if isinstance(record, bytes) else json.dumps(record, ensure_ascii=False).encode()) + b"\n"


def write(path: Path, *records: Any) -> InputSpec:
    path.write_bytes(b"".join(line(r) for r in records))
    return InputSpec(path, None)


# Lines that are not a record at all: (raw line, detail fragment). "malformed" for every builder.
MALFORMED = [
    (b"{not json", "not valid JSON"),  # broken JSON
    (b"[1, 2]", "expected a JSON object per line, got a list"),  # JSON, but not an object
    (b'"abc"', "got a string"),  # a bare string
    (b"null", "got null"),  # a bare null
    (b'{"query": NaN}', "NaN is not valid JSON"),  # Python's json would accept it; JSON does not
    (b'{"query": 1e999}', "out of range"),  # overflows to infinity
    (b'{"query": -Infinity}', "-Infinity is not valid JSON"),
    (b'{"query": ' + b"9" * 5000 + b"}", "not valid JSON"),  # beyond Python's int digit limit
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"query": "\\ud800"}', "lone surrogate"),  # decodes, but cannot be written as UTF-8
    (b'{"query": "\xff\xfe"}', "not UTF-8 text (byte 0xff at column 12)"),  # one bad byte costs only this line
    (b'{"query": "x"}', "missing field(s)"),
]


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize(("raw", "detail"), MALFORMED)
def test_malformed_lines(tmp_path: Path, builder: str, raw: bytes, detail: str) -> None:
    good, build = BUILDERS[builder]
    spec = write(tmp_path / "in.jsonl", good, raw, good)
    _rows, report = build([spec], "skip")
    assert report.as_dict() == {"read": 3, "written": 2, "rejected": {"malformed": 1}}
    (reject,) = report.rejects
    assert detail in reject["detail"] and reject["source"].endswith("in.jsonl:2")
    # The raw line is kept (as text), not null.
    assert reject["record"] == raw.decode("utf-8", errors="replace")
    with pytest.raises(BuildError, match=r"in\.jsonl:2: ") as info:
        build([spec], "stop")
    assert detail in str(info.value)


# Wrong field types, shared by both planning builders: (changes, reason, detail fragment).
COMMON_BAD = [
    ({"query": None}, "bad_field:query", "query must be a non-empty string, got null"),  # the issue's case
    ({"query": ["a", "b"]}, "bad_field:query", "got a list"),  # the issue's case
    ({"query": "  "}, "bad_field:query", "got a string ('  ')"),  # blank text is no query
    ({"query": 3}, "bad_field:query", "got a number (3)"),
    ({"experts": {"数据分析专家": 1}}, "bad_field:experts", "got an object"),  # the issue's case
    ({"experts": "数据分析专家"}, "bad_field:experts", "got a string"),
    ({"experts": []}, "bad_field:experts", "got an empty list"),
    ({"experts": ["数据分析专家", None]}, "bad_field:experts", "but item 1 is null"),
    ({"tools": "abc"}, "bad_field:tools", "tools must be a list of non-empty strings, got a string ('abc')"),
    ({"tools": [{"name": "x"}]}, "bad_field:tools", "but item 0 is an object"),
    ({"products": 7}, "bad_field:products", "got a number (7)"),
    ({"history": "hi"}, "bad_field:history", "got a string"),
    ({"history": [["user", "hi"]]}, "bad_field:history", "but item 0 is a list"),
    ({"history": [{"role": "user"}]}, "bad_field:history", "but item 0 has content null"),
    ({"history": [{"role": 1, "content": "x"}]}, "bad_field:history", "but item 0 has role a number (1)"),
    ({"id": {"n": 1}}, "bad_field:id", "id must be a string or an integer, got an object"),
    ({"id": True}, "bad_field:id", "got a boolean (true)"),
]
GRPO_BAD = [
    *COMMON_BAD,
    # The gold fields: gold_invalid (as for a gold failing the schema), the detail names the field.
    ({"rewrite": 5}, "gold_invalid", "rewrite must be a string, got a number (5)"),
    ({"plan": "abc"}, "gold_invalid", "plan must be a list of step objects, got a string"),
    ({"plan": [1]}, "gold_invalid", "but item 0 is a number (1)"),
    ({"plan": [{"专家": ["x"], "处理问题": ["y"]}]}, "gold_invalid", "plan step 0 must name its expert as a string"),
    ({"plan": {"专家": "数据分析专家"}}, "gold_invalid", "got an object"),
]
SFT_BAD = [
    *COMMON_BAD,
    ({"output": None}, "bad_field:output", "output must be a string, got null"),
    ({"output": [OUTPUT]}, "bad_field:output", "got a list"),
    ({"gold": "abc"}, "bad_field:gold", "gold must be an object"),
    ({"gold": {"plan": "abc"}}, "bad_field:gold", "gold plan must be a list of step objects, got a string"),
    ({"gold": {"plan": [3]}}, "bad_field:gold", "but item 0 is a number (3)"),
    ({"gold": {"plan": [{"专家": {"x": 1}}]}}, "bad_field:gold", "gold plan step 0 must name its expert as a string"),
]
CASES = [("grpo", *c) for c in GRPO_BAD] + [("sft", *c) for c in SFT_BAD]


@pytest.mark.parametrize(("builder", "changes", "reason", "detail"), CASES)
def test_bad_fields(tmp_path: Path, builder: str, changes: dict[str, Any], reason: str, detail: str) -> None:
    good, build = BUILDERS[builder]
    bad = {**good, **changes}
    spec = write(tmp_path / "in.jsonl", good, bad, good)
    _rows, report = build([spec], "skip")
    assert report.as_dict() == {"read": 3, "written": 2, "rejected": {reason: 1}}
    (reject,) = report.rejects
    assert detail in reject["detail"], reject["detail"]
    assert reject["record"] == bad  # a record rejected after parsing is kept parsed
    if reason.startswith("bad_field:"):
        # Under stop, the first bad field ends the build naming file:line and the field.
        with pytest.raises(BuildError, match=r"in\.jsonl:2: " + reason.split(":")[1]):
            build([spec], "stop")


def test_null_optional_fields_mean_not_given(tmp_path: Path) -> None:
    record = {**ANNOTATED, "tools": None, "products": None, "history": None, "id": None}
    rows, report = build_grpo([write(tmp_path / "in.jsonl", record)], GrpoOptions())
    assert report.written == 1 and "id" not in rows[0]


def test_skip_skips_every_kind_of_bad_record_and_counts_them(tmp_path: Path) -> None:
    bad = [raw for raw, _ in MALFORMED] + [{**ANNOTATED, **c} for c, _, _ in GRPO_BAD]
    spec = write(tmp_path / "in.jsonl", ANNOTATED, *bad, ANNOTATED)
    rows, report = build_grpo([spec], GrpoOptions(on_error="skip"))
    assert report.read == len(bad) + 2 and len(rows) == report.written == 2
    assert sum(report.rejected.values()) == len(bad)
    report.check()


def test_bom_does_not_cost_the_first_record(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + line(ANNOTATED) + line({**ANNOTATED, "id": "b"}))
    _rows, report = build_grpo([InputSpec(path, None)], GrpoOptions())
    assert report.as_dict() == {"read": 2, "written": 2, "rejected": {}}
    # A BOM at the start of a later line (files joined with cat) is ignored too.
    path.write_bytes(path.read_bytes() * 2)
    assert build_grpo([InputSpec(path, None)], GrpoOptions())[1].written == 4


def test_crlf_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(line(ANNOTATED).replace(b"\n", b"\r\n") + b"\r\n  \n" + line(ANNOTATED))
    _, report = build_grpo([InputSpec(path, None)], GrpoOptions())
    assert report.as_dict() == {"read": 2, "written": 2, "rejected": {}}


def test_cli_stop_names_file_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "in.jsonl", ANNOTATED, {**ANNOTATED, "query": None})
    out = tmp_path / "o.jsonl"
    assert main(["build", "planning-grpo", "-i", str(tmp_path / "in.jsonl"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"rewardkit build planning-grpo: {tmp_path / 'in.jsonl'}:2: query must be a non-empty string, got null "
        "(use --on-error skip to reject such records and go on)\n"
    )
    assert not out.exists()


def test_cli_rejects_file_keeps_the_raw_line(tmp_path: Path) -> None:
    raw = b'{"query": "\xff", "broken'
    write(tmp_path / "in.jsonl", ANNOTATED, raw, {**ANNOTATED, "tools": "abc"})
    rejects = tmp_path / "r.jsonl"
    argv = [
        "build",
        "planning-grpo",
        "-i",
        str(tmp_path / "in.jsonl"),
        "-o",
        str(tmp_path / "o.jsonl"),
        "--on-error",
        "skip",
        "--rejects",
        str(rejects),
    ]
    assert main(argv) == 0
    first, second = (json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines())
    assert first["reason"] == "malformed" and first["record"] == '{"query": "\ufffd", "broken'
    assert second["reason"] == "bad_field:tools" and second["record"]["tools"] == "abc"


# --- tau2 -------------------------------------------------------------------------

TAU2_BAD = [
    # a task that is not an object, or has no usable id: it can never be named by a split
    ([1, 2], "bad_task", "a task must be an object with a string or integer 'id', got a list"),
    ("task", "bad_task", "got a string"),
    ({"evaluation_criteria": {}}, "bad_task", "an object with id null"),
    (task({"n": 1}), "bad_task", "an object with id an object"),
    # a repeated id: the first one is kept
    (task("good"), "duplicate_task_id", "task id 'good' is already used by item 0"),
    # evaluation_criteria the rewards could not read
    (task("x", "evaluation_criteria", "abc"), "bad_evaluation_criteria", "criteria: must be an object, got a string"),
    (task("x", "evaluation_criteria.actions", "abc"), "bad_evaluation_criteria", "actions: must be a list"),
    (task("x", "evaluation_criteria.actions", [1]), "bad_evaluation_criteria", "actions[0]: must be an object"),
    (task("x", "evaluation_criteria.actions", [{"name": 5}]), "bad_evaluation_criteria", "got name a number"),
    (task("x", "evaluation_criteria.actions", [{"name": "nope"}]), "bad_evaluation_criteria", "tool 'nope' does not"),
    (
        task("x", "evaluation_criteria.actions", [{"name": "calculate", "arguments": "1+1"}]),
        "bad_evaluation_criteria",
        "'arguments' must be an object",
    ),
    (task("x", "evaluation_criteria.communicate_info", "17.5"), "bad_evaluation_criteria", "communicate_info: must"),
    (task("x", "evaluation_criteria.nl_assertions", [1]), "bad_evaluation_criteria", "nl_assertions: must be"),
    (task("x", "evaluation_criteria", None), "no_evaluation_criteria", "no evaluation_criteria"),
    # gold arguments the tool's schema refuses: the harness would run nothing, and doing nothing would match
    (
        task("x", "evaluation_criteria.actions", [{"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}}]),
        "bad_gold_arguments",
        "the arguments of 'cancel_pending_order' do not fit its schema (arguments: 'reason' is a required property)",
    ),
    (
        task("x", "evaluation_criteria.actions", [{"name": "get_order_details", "arguments": {"order_id": 5}}]),
        "bad_gold_arguments",
        "(order_id: 5 is not of type 'string')",
    ),
    # a gold write that fails when the gold replays on a fresh database (no such order): the gold state lacks it
    (
        task(
            "x",
            "evaluation_criteria.actions",
            [{"name": "cancel_pending_order", "arguments": {"order_id": "#W0000000", "reason": "no longer needed"}}],
        ),
        "gold_fails",
        "actions[0]: the gold write 'cancel_pending_order' fails when the gold actions are replayed on a fresh "
        "database (NOT_FOUND: Order not found)",
    ),
    # the scenario the opening turn is made from
    (task("x", "user_scenario", "abc"), "bad_user_scenario", "user_scenario: must be an object"),
    (task("x", "user_scenario.instructions", 5), "bad_user_scenario", "instructions: must be an object or a string"),
    (task("x", "user_scenario.instructions.known_info", ["x"]), "bad_user_scenario", "known_info: must be a string"),
    (task("x", "user_scenario.instructions.reason_for_call", 5), "no_reason_for_call", "reason_for_call must"),
    (task("x", "user_scenario.instructions.reason_for_call", "\ud800"), "bad_task", "lone surrogate"),
    # nothing left for the opening turn once the simulator-only sentences are dropped
    (
        task("x", "user_scenario.instructions", {"reason_for_call": "If the agent asks, say no."}),
        "no_reason_for_call",
        "nothing is left of the request",
    ),
]


@pytest.mark.parametrize(("bad", "reason", "detail"), TAU2_BAD)
def test_tau2_bad_tasks(tmp_path: Path, bad: Any, reason: str, detail: str) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([task("good"), bad, task("good2")]), encoding="utf-8")
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"s": ["good", "x", "good2"]}), encoding="utf-8")
    rows, report = build_tau2_grpo(Tau2Options(domain="retail", split="s", tasks_file=tasks, split_file=split))
    assert len(rows) == report.written == 2
    assert report.rejected[reason] == 1, report.rejects
    assert any(detail in r["detail"] for r in report.rejects), report.rejects
    # An item no split can name is counted on top of the split's 3 ids (and "x" is then a missing_task).
    unnamed = not (isinstance(bad, dict) and bad.get("id") == "x")
    assert report.read == 3 + unnamed
    assert report.rejected["missing_task"] == unnamed
    report.check()


@pytest.mark.parametrize(
    ("tasks", "split", "message"),
    [
        ("[{", {"s": []}, "tasks file .*: not valid JSON"),  # file-level problems stay BuildErrors
        ("[NaN]", {"s": []}, "NaN is not valid JSON"),
        ('{"0": {}}', {"s": []}, "must be a JSON list of task objects, got an object"),
        ("[]", {"s": [{"id": 1}]}, "split 's': item 0 must be a task id"),
        ("[]", {"s": "0"}, "split 's' must be a list of task ids"),
    ],
)
def test_tau2_unusable_files_raise(tmp_path: Path, tasks: str, split: Any, message: str) -> None:
    (tmp_path / "t.json").write_text(tasks, encoding="utf-8")
    (tmp_path / "s.json").write_text(json.dumps(split), encoding="utf-8")
    with pytest.raises(BuildError, match=message):
        build_tau2_grpo(
            Tau2Options(domain="retail", split="s", tasks_file=tmp_path / "t.json", split_file=tmp_path / "s.json")
        )
