"""``rewardkit env tools|replay`` run as a user runs them: a subprocess on the real retail data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _retail_gold import db_state

from rewardkit.envs import get_domain
from rewardkit.envs.retail.tools import TOOLS
from rewardkit.envs.sqlite_env import drop_nulls

ROOT = Path(__file__).resolve().parents[1]
RAW = db_state()
WRITES = {
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "return_delivered_order_items",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "rewardkit.cli", "env", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


class TestTools:
    def test_listing_has_every_tool_with_its_risk_and_required_args(self) -> None:
        out = run("tools", "--domain", "retail")
        assert out.returncode == 0, out.stderr
        rows = {line.split()[0]: line for line in out.stdout.splitlines()}
        assert list(rows) == list(TOOLS)
        for name, line in rows.items():
            assert line.split()[1] == ("write" if name in WRITES else "read"), line
            for arg in TOOLS[name].parameters["required"]:
                assert arg in line, (name, arg)
            assert "idempotency_key" not in line  # optional, so not listed as required

    def test_json_is_exactly_the_openai_specs(self) -> None:
        out = run("tools", "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == get_domain("retail").tool_specs()


class TestReplay:
    def test_gold_exchange_of_task_0_changes_only_that_order(self, tmp_path: Path) -> None:
        out_file = tmp_path / "deep" / "state.json"
        out = run("replay", "--domain", "retail", "--task", "0", "--export", str(out_file))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert [line.split()[:3] for line in lines[:5]] == [
            ["1", "find_user_id_by_name_zip", "OK"],
            ["2", "get_order_details", "OK"],
            ["3", "get_product_details", "OK"],
            ["4", "get_product_details", "OK"],
            ["5", "exchange_delivered_order_items", "OK"],
        ]
        state = drop_nulls(json.loads(out_file.read_text(encoding="utf-8")))
        order = state["orders"]["#W2378156"]
        assert order["status"] == "exchange requested"
        assert order["exchange_new_items"] == ["7706410293", "7747408585"]
        others = {k: v for k, v in state["orders"].items() if k != "#W2378156"}
        assert others == {k: v for k, v in RAW["orders"].items() if k != "#W2378156"}
        assert state["users"] == RAW["users"] and state["products"] == RAW["products"]
        hashes = [line.split()[1] for line in lines if line.startswith("state_hash ")]
        assert len(hashes) == 1 and len(hashes[0]) == 64

    def test_read_only_replay_keeps_the_vendored_state(self, tmp_path: Path) -> None:
        # Same state, same hash: the hash printed for a no-write replay equals that of an empty replay.
        empty = write_json(tmp_path / "empty.json", [])
        reads = write_json(tmp_path / "reads.json", [{"name": "get_user_details", "arguments": {"user_id": "x"}}])
        outs = [run("replay", "--actions", str(f), "--export", str(tmp_path / f"{f.stem}.out")) for f in (empty, reads)]
        assert [o.returncode for o in outs] == [0, 0]
        assert outs[0].stdout.splitlines()[-1] == outs[1].stdout.splitlines()[-1]
        assert drop_nulls(json.loads((tmp_path / "reads.out").read_text(encoding="utf-8"))) == RAW

    def test_failing_calls_print_their_code_and_still_exit_0(self, tmp_path: Path) -> None:
        actions = [
            {"name": "get_order_details", "arguments": {"order_id": "#W0000000"}},
            {"name": "cancel_pending_order", "arguments": {"order_id": "#W2378156"}},  # missing reason
            {"name": "cancel_pending_order", "arguments": "not an object"},
            {"name": "no_such_tool"},
            {"name": "get_order_details", "arguments": {"order_id": "#W2378156"}},
        ]
        out = run("replay", "--actions", str(write_json(tmp_path / "a.json", actions)), "--export", str(tmp_path / "o"))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert [line.split()[2] for line in lines[:5]] == [
            "NOT_FOUND",
            "SCHEMA_VIOLATION",
            "SCHEMA_VIOLATION",
            "UNKNOWN_TOOL",
            "OK",
        ]
        assert "reason" in lines[1]  # the error message is printed after the code
        assert lines[4].split()[3:] == []  # a success prints no message
        assert "5 calls, 4 failed" in out.stdout
        assert (tmp_path / "o").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "no-such-task"], "no task 'no-such-task'"),
        (["--actions", "{missing}"], "not found"),
        (["--actions", "{bad_json}"], "not readable JSON"),
        # an integer over Python's 4300-digit limit: a ValueError that is no JSONDecodeError (was a traceback)
        (["--actions", "{huge_int}"], "is not readable JSON: Exceeds the limit (4300 digits)"),
        (["--actions", "{not_list}"], "must hold a JSON list"),
        (["--actions", "{no_name}"], "item 1 must be an object with a string 'name'"),
        (["--task", "0", "--db", "{missing}"], "database"),
        (["--task", "0", "--db", "{not_list}"], "not a valid retail db"),
        (
            ["--domain", "airline", "--task", "0"],
            "unknown domain 'airline'; known domains: livestream, retail, or the path of a domain's folder",
        ),
    ],
)
def test_usage_errors_exit_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    files = {
        "missing": tmp_path / "missing.json",
        "bad_json": tmp_path / "bad.json",
        "not_list": write_json(tmp_path / "obj.json", {"name": "get_user_details"}),
        "no_name": write_json(tmp_path / "noname.json", [{"name": "calculate"}, {"arguments": {}}]),
        "huge_int": tmp_path / "huge.json",
    }
    files["huge_int"].write_text('[{"name": "calculate", "arguments": {"expression": ' + "9" * 5000 + "}}]")
    files["bad_json"].write_text("[{", encoding="utf-8")
    export = tmp_path / "out.json"
    out = run("replay", *[a.format(**files) for a in args], "--export", str(export))
    assert out.returncode == 2, out.stdout
    assert message in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr  # one line, no traceback
    if "{" in " ".join(args):  # a file's problem names the file
        assert str(tmp_path) in out.stderr
    assert not export.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # NaN passes every comparison, and pydantic refused it later in a 23-line traceback; so did -1 sessions.
        (["--idle-s", "nan"], "argument --idle-s: 'nan' is not a finite number in (0, 86400]"),
        (["--idle-s", "inf"], "argument --idle-s: 'inf' is not a finite number in (0, 86400]"),
        (["--idle-s", "0"], "argument --idle-s: '0' is not a finite number in (0, 86400]"),  # was the default, 600
        (["--idle-s", "-5"], "argument --idle-s: '-5' is not a finite number in (0, 86400]"),
        (["--max-sessions", "-1"], "argument --max-sessions: '-1' is not an integer >= 1"),
        (["--max-sessions", "0"], "argument --max-sessions: '0' is not an integer >= 1"),  # served 64, silently
        (["--max-sessions", "2.5"], "argument --max-sessions: '2.5' is not an integer >= 1"),
    ],
)
def test_serve_refuses_a_limit_out_of_range_in_one_line(args: list[str], message: str) -> None:
    out = run("serve", "--openenv", *args)
    assert out.returncode == 2, out.stdout
    assert out.stderr.startswith("rewardkit env serve: ") and message in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr  # one line, no traceback
