"""tau2-grpo: tau2 retail tasks → GRPO rows; the second→first person rewrite; ms-swift can load the rows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _retail_gold import LEFT_OUT, SPLITS, rows_of

from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
from rewardkit.envs import get_domain
from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.scenario import first_person, opening_turn, request_only
from rewardkit.runs.stats.metrics import task_order

ROOT = Path(__file__).resolve().parents[1]
# Read the vendored files directly, not through the builder's loaders, so a loader bug cannot hide.
TASKS = {t["id"]: t for t in json.loads((DATA_DIR / "tasks.json").read_text(encoding="utf-8"))}
POLICY = (DATA_DIR / "policy.md").read_text(encoding="utf-8")
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
REWRITTEN = {"you", "your", "yours", "yourself", "you're", "you'd", "you'll", "you've", "are", "were"}


def build(split: str, **kw: Any) -> tuple[list[dict[str, Any]], Any]:
    return build_tau2_grpo(Tau2Options(domain="retail", split=split, **kw))


def instructions(task_id: str) -> dict[str, Any]:
    return TASKS[task_id]["user_scenario"]["instructions"]


@pytest.fixture(scope="module")
def base_rows() -> list[dict[str, Any]]:
    return build("base")[0]


class TestRows:
    # Every task of the split but those whose gold writes fail and those whose gold changes nothing and names
    # nothing to show (_retail_gold.py), each counted under its reason.
    @pytest.mark.parametrize("split", ["train", "test", "base"])
    def test_one_row_per_task_in_split_order(self, split: str) -> None:
        rows, report = build(split)
        assert [json.loads(r["task"])["id"] for r in rows] == rows_of(split)
        rejected = Counter(LEFT_OUT[i] for i in SPLITS[split] if i in LEFT_OUT)
        assert rejected and sum(rejected.values()) + len(rows) == len(SPLITS[split])  # each split leaves some out
        assert report.as_dict() == {"read": len(SPLITS[split]), "written": len(rows), "rejected": dict(rejected)}

    def test_task_column_round_trips_to_tasks_json(self, base_rows: list[dict[str, Any]]) -> None:
        for row in base_rows:
            assert isinstance(row["task"], str)
            task = json.loads(row["task"])
            assert task == TASKS[task["id"]]

    def test_tools_column_is_the_domains_openai_specs(self, base_rows: list[dict[str, Any]]) -> None:
        assert {row["tools"] for row in base_rows} == {base_rows[0]["tools"]}  # one string shared by every row
        assert json.loads(base_rows[0]["tools"]) == get_domain("retail").tool_specs()

    def test_messages_are_policy_then_opening_turn(self, base_rows: list[dict[str, Any]]) -> None:
        for row in base_rows:
            task = json.loads(row["task"])
            assert [m["role"] for m in row["messages"]] == ["system", "user"]
            assert row["messages"][0]["content"] == POLICY
            assert row["messages"][1]["content"] == opening_turn(instructions(task["id"]))
            assert row["domain"] == "retail"
            assert set(row) == {"messages", "tools", "task", "domain"}

    def test_multi_turn_rows_leave_the_user_turn_to_the_simulator(self, base_rows: list[dict[str, Any]]) -> None:
        from rewardkit.data_builders.tau2 import MULTI_TURN_PLACEHOLDER

        rows, report = build("base", multi_turn=True)
        assert report.written == len(base_rows) == len(rows)
        for row, single in zip(rows, base_rows, strict=True):
            assert row["messages"][1] == {"role": "user", "content": MULTI_TURN_PLACEHOLDER}
            # Everything else is the single-turn row: same policy, tools, task and domain.
            assert row["messages"][0] == single["messages"][0]
            assert (row["tools"], row["task"], row["domain"]) == (single["tools"], single["task"], single["domain"])

    def test_task_0_opening_turn(self, base_rows: list[dict[str, Any]]) -> None:
        assert base_rows[0]["messages"][1]["content"] == (
            "I am Yusuf Rossi in zip code 19122. I received my order #W2378156 and wish to exchange the mechanical "
            "keyboard for the same one but with clicky switches and the smart thermostat for one compatible with "
            "Google Home instead of Apple HomeKit. If there is no keyboard that is clicky, RGB backlight, full size, "
            "I'd go for no backlight."
        )


FIRST_PERSON = [
    ("You are Yusuf Rossi in zip code 19122.", "I am Yusuf Rossi in zip code 19122."),
    ("You're Chen Smith, living in Jacksonville 32278.", "I'm Chen Smith, living in Jacksonville 32278."),
    ("You name is Sofia Hernandez and your zip code is 98193.", "My name is Sofia Hernandez and my zip code is 98193."),
    (
        "Your name is Daiki Sanchez, and you live in 46236, your email is daikisanchez1479@example.com.",
        "My name is Daiki Sanchez, and I live in 46236, my email is daikisanchez1479@example.com.",
    ),
    (
        "You received your order #W2378156. If not, you'd go for no backlight.",
        "I received my order #W2378156. If not, I'd go for no backlight.",
    ),
    (
        "But if the agent asks you for confirm, you say you want to rethink.",
        "But if the agent asks me for confirm, I say I want to rethink.",
    ),
    ("Ask for the refund you should expect.", "Ask for the refund I should expect."),
    ("If not possible, you are angry. You were charged twice.", "If not possible, I am angry. I was charged twice."),
    (
        "It is in your orders (you don't want to reveal it yourself).",
        "It is in my orders (I don't want to reveal it myself).",
    ),
    (
        "The card is yours, and the agent tells you that it goes to you.",
        "The card is mine, and the agent tells me that it goes to me.",
    ),
    ("You'll first inquire; you've already paid.", "I'll first inquire; I've already paid."),
    ("Cancel the grill you just ordered, not YOUR boots.", "Cancel the grill I just ordered, not MY boots."),
    ("Your youthful yoga mat", "My youthful yoga mat"),  # only whole words change
    # First person already there, "were" not after "you", no pronoun at all: untouched.
    ("respond with 'I forgot the W at the beginning'", "respond with 'I forgot the W at the beginning'"),
    ("the items that were in the order", "the items that were in the order"),
    ("For #W6908222, exchange {'color': 'blue'}", "For #W6908222, exchange {'color': 'blue'}"),
]


@pytest.mark.parametrize(("text", "expected"), FIRST_PERSON)
def test_first_person(text: str, expected: str) -> None:
    assert first_person(text) == expected


OPENING = [
    ({"known_info": "You are Ann.", "reason_for_call": "You want a refund."}, "I am Ann. I want a refund."),
    ({"reason_for_call": "You want a refund.", "known_info": None}, "I want a refund."),
    ({"known_info": "You are Ann.", "reason_for_call": ". You lost it."}, "I am Ann. I lost it."),
    (
        {"known_info": "You are Ann.", "reason_for_call": "Refund.", "unknown_info": "U", "task_instructions": "T"},
        "I am Ann. Refund.",
    ),
]


@pytest.mark.parametrize(("scenario", "expected"), OPENING)
def test_opening_turn_is_known_info_then_reason_only(scenario: dict[str, Any], expected: str) -> None:
    assert opening_turn(scenario) == expected


class TestAllTasksKeepTheirFacts:
    @pytest.mark.parametrize("task_id", sorted(TASKS, key=task_order))
    def test_only_pronouns_change_and_ids_stay_verbatim(self, task_id: str) -> None:
        ins = instructions(task_id)
        # the sentences kept for the opening turn, before the pronoun rewrite
        source = f"{request_only(ins.get('known_info') or '')} {request_only(ins['reason_for_call'])}"
        out = opening_turn(ins)
        before, after = WORD.findall(source), WORD.findall(out)
        assert len(before) == len(after)
        changed = {(b, a) for b, a in zip(before, after, strict=True) if b != a}
        assert all(b.lower() in REWRITTEN for b, _ in changed), changed
        # Every token with a digit, @, # or _ (ids, zips, emails, prices) survives, in order.
        facts = re.findall(r"\S*[\d@#_]\S*", source)
        assert re.findall(r"\S*[\d@#_]\S*", out) == facts

    def test_gold_authentication_arguments_appear_in_the_opening_turn(self) -> None:
        checked, scripted = 0, set()
        for task in TASKS.values():
            ins = task["user_scenario"]["instructions"]
            out = opening_turn(ins)
            for action in task["evaluation_criteria"]["actions"]:
                if action["name"] in ("find_user_id_by_name_zip", "find_user_id_by_email"):
                    for value in action["arguments"].values():
                        checked += 1
                        if value.lower() not in out.lower():
                            # Tasks 67/68 script wrong zips for the simulator to give first; never in the opening.
                            assert value in ins["task_instructions"], (task["id"], value)
                            scripted.add(task["id"])
        assert checked > 150  # most tasks authenticate; the loop must not pass vacuously
        assert scripted == {"67", "68"}

    def test_simulator_directions_are_dropped(self) -> None:
        outs = {task_id: opening_turn(instructions(task_id)) for task_id in TASKS}
        assert "5206946487" in instructions("29")["reason_for_call"] and "5206946487" not in outs["29"]  # a secret
        for out in outs.values():
            assert not re.search(r"do not (share|reveal)|if the agent asks|make sure you mention", out, re.I), out
        # the request itself stays: task 5 still asks to exchange the bottle and the lamp
        assert "exchange the water bottle and the desk lamp" in outs["5"]

    @pytest.mark.parametrize(
        ("text", "kept"),
        [
            ("Cancel #W1. If the agent asks why, say by mistake.", "Cancel #W1."),
            (
                "Return it. (Everything except a mouse, but do not reveal it to the agent). Thanks.",
                "Return it. Thanks.",
            ),
            ("Make sure you mention both at once. Exchange the lamp.", "Exchange the lamp."),
            ("Ask the agent how much you save.", "Ask the agent how much you save."),  # a request to the agent
            ("If it is pricier than $300, cancel it.", "If it is pricier than $300, cancel it."),  # no agent: kept
        ],
    )
    def test_request_only(self, text: str, kept: str) -> None:
        assert request_only(text) == kept

    def test_simulator_only_fields_never_leak(self) -> None:
        checked = 0
        for task_id in TASKS:
            ins = instructions(task_id)
            out = opening_turn(ins)
            shown = f"{ins.get('known_info')} {ins['reason_for_call']}"
            for key in ("unknown_info", "task_instructions"):
                hidden = (ins.get(key) or "").strip()
                if len(hidden) > 10 and hidden not in shown:
                    assert hidden not in out and first_person(hidden) not in out, (task_id, key)
                    checked += 1
        assert checked > 150


def test_rejects_are_counted_by_reason(tmp_path: Path) -> None:
    def task(task_id: str, **changes: Any) -> dict[str, Any]:
        return {**json.loads(json.dumps(TASKS["0"])), "id": task_id, **changes}

    no_reason = task("no_reason")
    del no_reason["user_scenario"]["instructions"]["reason_for_call"]
    tasks = [task("a"), task("no_eval", evaluation_criteria=None), no_reason, task("b")]
    (tasks_file := tmp_path / "tasks.json").write_text(json.dumps(tasks), encoding="utf-8")
    split = {"mine": ["a", "ghost", "no_eval", "no_reason", "b"]}
    (split_file := tmp_path / "split.json").write_text(json.dumps(split), encoding="utf-8")
    (policy_file := tmp_path / "policy.md").write_text("Be brief.", encoding="utf-8")
    out, report = tmp_path / "rows.jsonl", tmp_path / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "rewardkit.cli",
        "build",
        "tau2-grpo",
        "--domain",
        "retail",
        "--split",
        "mine",
        "--out",
        str(out),
        "--tasks-file",
        str(tasks_file),
        "--split-file",
        str(split_file),
        "--policy-file",
        str(policy_file),
        "--report",
        str(report),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text()) == {
        "read": 5,
        "written": 2,
        "rejected": {"missing_task": 1, "no_evaluation_criteria": 1, "no_reason_for_call": 1},
    }
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [json.loads(r["task"])["id"] for r in rows] == ["a", "b"]
    assert all(r["messages"][0]["content"] == "Be brief." for r in rows)
    assert "read 5  written 2  rejected 3" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--split", "nope"], "split 'nope' not in the split file"),
        (["--split", "train", "--tasks-file", "missing.json"], "not found"),
        (["--split", "train", "--domain", "airline"], "unknown domain 'airline'"),
    ],
)
def test_build_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    cmd = [sys.executable, "-m", "rewardkit.cli", "build", "tau2-grpo", "--out", str(tmp_path / "o.jsonl"), *args]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_ms_swift_loads_the_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "cache"))  # swift's map cache, kept out of ~/.cache
    from swift.dataset import load_dataset

    rows, _ = build("test")
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    # GRPO keeps the extra columns (task, domain) for the reward functions: remove_unused_columns=False.
    train, val = load_dataset([str(path)], remove_unused_columns=False)
    assert val is None and len(train) == len(rows) == len(rows_of("test"))
    for loaded, row in zip(train, rows, strict=True):
        assert {"messages", "tools", "task", "domain"} <= set(loaded)
        assert [{"role": m["role"], "content": m["content"]} for m in loaded["messages"]] == row["messages"]
        assert loaded["tools"] == row["tools"] and loaded["task"] == row["task"]
        assert loaded["domain"] == "retail"
