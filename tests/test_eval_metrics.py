"""The metrics of agent evaluation (pass^k, summaries, paired comparisons) on hand-made runs, and ``eval compare``."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from rewardkit.cli import main
from rewardkit.runs.stats.metrics import (
    EvalError,
    TaskStats,
    compare,
    pass_hat_k,
    summarize_episodes,
    task_stats,
)
from rewardkit.runs.stats.plots import plot_compare, plot_eval
from rewardkit.runs.stats.tables import read_run, write_task_table

PNG = b"\x89PNG\r\n\x1a\n"


def ep(task: str, trial: int, reward: float | None = 1.0, status: str = "ok", **extra: Any) -> dict[str, Any]:
    """One episode record; an infra_error has no reward or tcr."""
    infra = status == "infra_error"
    base = {
        "task_id": task,
        "trial": trial,
        "status": status,
        "reward": None if infra else reward,
        "tcr": None if infra else reward,
        "termination": "user_sim_error" if infra else "user_stop",
        "turns": 4,
        "tool_calls": 2,
        "tool_errors": 0,
        "tools": {},
        "error": "boom" if infra else None,
    }
    return {**base, **extra}


def run(successes: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Episodes from a per-task success matrix: {"7": [1, 0, 1]} is task 7, trials 0..2."""
    return [ep(t, i, float(s)) for t, row in successes.items() for i, s in enumerate(row)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- pass^k ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "c", "k", "want"),
    [
        (4, 4, 1, 1),
        (4, 4, 4, 1),  # every trial succeeds: pass^k = 1 for every k
        (4, 2, 1, Fraction(2, 4)),  # C(2,1)/C(4,1) = 2/4
        (4, 2, 2, Fraction(1, 6)),  # C(2,2)/C(4,2) = 1/6
        (4, 2, 3, 0),
        (4, 2, 4, 0),  # C(2,3) = C(2,4) = 0
        (5, 3, 2, Fraction(3, 10)),  # C(3,2)/C(5,2) = 3/10
        (4, 0, 1, 0),
    ],
)
def test_pass_hat_k_is_c_choose_k_over_n_choose_k(n: int, c: int, k: int, want: Fraction) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(float(want), abs=1e-15)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 3, 4), (0, 0, 1), (4, 5, 1), (4, 2, 0), (4, -1, 1)])
def test_pass_hat_k_refuses_what_it_cannot_estimate(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_pass_k_averages_over_tasks() -> None:
    # 3 tasks x 4 trials: "1" 4/4, "2" 2/4, "3" 0/4.
    summary = summarize_episodes(run({"1": [1, 1, 1, 1], "2": [1, 0, 1, 0], "3": [0, 0, 0, 0]}))
    want = {
        1: (1 + Fraction(1, 2) + 0) / 3,  # = 1/2
        2: (1 + Fraction(1, 6) + 0) / 3,  # = 7/18
        3: (1 + 0 + 0) / Fraction(3),  # = 1/3
        4: (1 + 0 + 0) / Fraction(3),  # = 1/3
    }
    assert [e["k"] for e in summary["pass_hat_k"]] == [1, 2, 3, 4]
    for entry in summary["pass_hat_k"]:
        assert entry["value"] == pytest.approx(float(want[entry["k"]]))
        assert (entry["tasks"], entry["skipped"]) == (3, 0)
    assert summary["mean"]["reward"] == pytest.approx(6 / 12)  # episode-weighted: 6 successes in 12 episodes


def test_infra_errors_are_excluded_and_counted_and_short_tasks_skipped() -> None:
    # Task "9": trial 2 is an infra error -> n = 3, c = 3. Task "10": n = 4, c = 3.
    records = [*run({"10": [1, 1, 0, 1]}), ep("9", 0), ep("9", 1), ep("9", 2, status="infra_error"), ep("9", 3)]
    stats = task_stats(records)
    assert [s.task_id for s in stats] == ["9", "10"]  # numeric order, not "10" < "9"
    assert [(s.trials, s.successes, s.infra_errors) for s in stats] == [(3, 3, 1), (4, 3, 0)]
    summary = summarize_episodes(records, trials=5)
    by_k = {e["k"]: e for e in summary["pass_hat_k"]}
    assert by_k[1]["value"] == pytest.approx((1 + 3 / 4) / 2)  # 7/8: per task, then over tasks
    assert by_k[3]["value"] == pytest.approx((1 + 1 / 4) / 2)  # "9": C(3,3)/C(3,3) = 1; "10": C(3,3)/C(4,3) = 1/4
    assert (by_k[4]["value"], by_k[4]["tasks"], by_k[4]["skipped"]) == (0.0, 1, 1)  # "9" has only 3 valid trials
    assert (by_k[5]["value"], by_k[5]["tasks"], by_k[5]["skipped"]) == (None, 0, 2)
    assert summary["mean"]["reward"] == pytest.approx(6 / 7)  # 6 successes in 7 valid episodes
    assert summary["episodes"] == {"total": 8, "valid": 7, "infra_error": 1, "duplicates_replaced": 0}
    assert summary["tasks"] == {"total": 2, "no_valid_trial": 0}
    assert len(summarize_episodes(records)["pass_hat_k"]) == 4  # default: the most valid trials of any task


def test_the_user_reviews_flags_are_counted_and_pass_k_given_without_them() -> None:
    # Task "1": trials 0 and 1 succeed, trial 2 fails with a flagged user. Task "2": one failure, its user flagged.
    flag = [{"kind": "premature_stop", "turn": 5, "evidence": "..."}]
    records = [ep("1", 0), ep("1", 1), ep("1", 2, 0.0, user_flags=flag), ep("2", 0, 0.0, user_flags=flag * 2)]
    review = summarize_episodes(records, trials=1)["user_review"]
    assert (review["flagged"], review["kinds"]) == (2, {"premature_stop": 3})
    # without the flagged episodes: task "1" is 2 of 2 (pass^1 = 1), task "2" has no trial left (skipped)
    [k1] = review["pass_hat_k_without_flagged"]
    assert (k1["value"], k1["tasks"], k1["skipped"]) == (1.0, 1, 0)
    assert summarize_episodes(records, trials=1)["pass_hat_k"][0]["value"] == pytest.approx((2 / 3 + 0) / 2)
    from rewardkit.runs.episodes.evaluation import headline

    assert headline(summarize_episodes(records, trials=1)).endswith(
        "user review: 2 flagged (pass^1 1.000 without them)"
    )
    assert "user review" not in headline(summarize_episodes(records[:2], trials=1))  # none flagged: not mentioned


def test_a_task_with_only_infra_errors_has_no_valid_trial() -> None:
    summary = summarize_episodes([ep("1", 0), ep("2", 0, status="infra_error")])
    assert summary["tasks"] == {"total": 2, "no_valid_trial": 1}
    assert summary["pass_hat_k"] == [{"k": 1, "value": 1.0, "tasks": 1, "skipped": 1}]
    assert task_stats([ep("2", 0, status="infra_error")])[0].pass1 is None


def test_duplicate_trials_last_wins() -> None:
    # A resumed run appended trial 0 of task "1" again: the later success replaces the earlier failure.
    records = [ep("1", 0, 0.0), ep("1", 1, 0.0), ep("1", 0, 1.0)]
    assert [(s.trials, s.successes) for s in task_stats(records)] == [(2, 1)]
    assert summarize_episodes(records)["episodes"]["duplicates_replaced"] == 1


def test_terminations_include_infra_and_tool_frequency() -> None:
    records = [
        ep("1", 0, tools={"get_order": 2, "cancel": 1}, tool_calls=3, tool_errors=1, turns=6),
        ep("1", 1, 0.0, tools={"get_order": 1}, tool_calls=1, termination="max_turns", turns=10),
        ep("2", 0, tools={}, tool_calls=0, turns=2),
        ep("2", 1, status="infra_error", tools={"get_order": 5}),  # excluded from the tool counts
    ]
    summary = summarize_episodes(records)
    assert summary["termination"] == {"user_stop": 2, "max_turns": 1, "user_sim_error": 1}
    assert summary["tools"] == {
        "get_order": {"calls": 3, "share_of_calls": 3 / 4, "episodes": 2, "share_of_episodes": 2 / 3},
        "cancel": {"calls": 1, "share_of_calls": 1 / 4, "episodes": 1, "share_of_episodes": 1 / 3},
    }
    mean = summary["mean"]
    assert mean["turns"] == pytest.approx((6 + 10 + 2) / 3)
    assert mean["tool_calls"] == pytest.approx((3 + 1 + 0) / 3)
    assert mean["tool_errors"] == pytest.approx(1 / 3)
    assert mean["tcr"] == pytest.approx(2 / 3)  # ep() sets tcr = reward


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"task_id": "1", "trial": 0, "status": "done"}, "'status'"),
        ({"task_id": "1", "trial": 0, "status": "ok", "reward": None}, "'reward'"),
        ({"task_id": "1", "trial": "0", "status": "ok", "reward": 1.0}, "'trial'"),
    ],
)
def test_unusable_records_are_refused(record: dict[str, Any], fragment: str) -> None:
    with pytest.raises(EvalError, match=fragment):
        summarize_episodes([record])


# -- compare -----------------------------------------------------------------------------------------------------
# Single trials. A: tasks 0-4 succeed, 5-9 fail. B: 4 flips down, 5-7 flip up. The paired diff is (3 - 1) / 10.
A = {**{str(t): [int(t < 5)] for t in range(10)}, "10": [1]}
B = {**{str(t): [int(t < 4 or 5 <= t <= 7)] for t in range(10)}, "11": [0]}
NO_VALID = [ep("12", 0, status="infra_error")]  # task 12 in both runs, with no valid trial in A


def test_compare_flipped_tasks_and_the_interval() -> None:
    result = compare(run(A) + NO_VALID, [*run(B), ep("12", 0)], n_boot=5000, seed=1)
    assert result["paired_tasks"] == 10
    assert result["diff"] == pytest.approx(0.2)
    assert (result["a"]["pass1"], result["b"]["pass1"]) == (pytest.approx(0.5), pytest.approx(0.7))
    low, high = result["ci"]
    assert -1 <= low < 0.2 < high <= 1
    assert result["improved"] == [{"task_id": t, "a": 0.0, "b": 1.0} for t in ("5", "6", "7")]
    assert result["regressed"] == [{"task_id": "4", "a": 1.0, "b": 0.0}]
    assert result["unchanged"] == 6
    assert (result["only_in_a"], result["only_in_b"], result["no_valid_trial"]) == (["10"], ["11"], ["12"])
    assert 0.5 < result["share_boot_positive"] <= 1
    assert len(result["per_task"]) == 10


def test_compare_is_deterministic_for_a_seed() -> None:
    runs = run(A), run(B)
    assert compare(*runs, n_boot=2000, seed=3) == compare(*runs, n_boot=2000, seed=3)
    # 10 single-trial tasks put the interval on a 0.1 grid; the share of positive resamples shows the seed.
    share = [compare(*runs, n_boot=2000, seed=seed)["share_boot_positive"] for seed in (3, 4)]
    assert share[0] != share[1]


def test_compare_a_run_with_itself() -> None:
    records = run({"1": [1, 0, 1], "2": [0, 0, 1], "3": [1, 1, 1]})
    result = compare(records, records)
    assert (result["diff"], result["ci"], result["share_boot_positive"]) == (0.0, [0.0, 0.0], 0.0)
    assert (result["improved"], result["regressed"], result["unchanged"]) == ([], [], 3)


def test_compare_multi_trial_pass1_and_task_tables(tmp_path: Path) -> None:
    # p_A = (2/4, 1/4), p_B = (3/4, 1/4): diff = ((3/4 - 2/4) + 0) / 2 = 1/8.
    a, b = run({"1": [1, 1, 0, 0], "2": [0, 0, 0, 1]}), run({"1": [1, 1, 1, 0], "2": [1, 0, 0, 0]})
    result = compare(a, b, n_boot=1000)
    assert result["diff"] == pytest.approx(1 / 8)
    assert result["improved"] == [{"task_id": "1", "a": 0.5, "b": 0.75}] and result["regressed"] == []
    # A per-task table written and read back compares exactly as the episodes do.
    tables = []
    for name, records in (("a", a), ("b", b)):
        write_task_table(task_stats(records), tmp_path / f"{name}.jsonl", tmp_path / f"{name}.csv")
        tables.append(read_run(tmp_path / f"{name}.jsonl"))
    assert all(isinstance(s, TaskStats) for t in tables for s in t)
    assert compare(*tables, n_boot=1000) == result
    csv_lines = (tmp_path / "a.csv").read_text().splitlines()
    assert csv_lines[0] == "task_id,trials,successes,infra_errors,pass1,mean_tcr,mean_turns,mean_tool_calls"
    assert csv_lines[1].startswith("1,4,2,0,0.5,0.5,4.0,2.0")


def test_compare_without_a_shared_task_is_an_error() -> None:
    with pytest.raises(EvalError, match="no task has a valid trial in both runs"):
        compare(run({"1": [1]}), run({"2": [1]}))


# -- files -------------------------------------------------------------------------------------------------------
def test_read_records_episodes_and_bad_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "e.jsonl", run({"1": [1, 0]}))
    assert [r["trial"] for r in read_run(path)] == [0, 1]
    # Line 1 good, line 2 blank, line 3 a bad status: the message counts the blank line.
    path.write_text(json.dumps(ep("1", 0)) + "\n\n" + json.dumps({**ep("1", 1), "status": "weird"}) + "\n")
    with pytest.raises(EvalError, match=r"e\.jsonl:3: 'status'"):
        read_run(path)
    path.write_text(json.dumps(ep("1", 0)) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"e\.jsonl:2: not valid JSON"):
        read_run(path)


def test_read_records_task_table_with_a_wrong_row(tmp_path: Path) -> None:
    rows = [{"task_id": "1", "trials": 2, "successes": 1}, ep("2", 0)]  # an episode row in a table
    with pytest.raises(EvalError, match=r"t\.jsonl:2: .*'successes'.*task table"):
        read_run(write_jsonl(tmp_path / "t.jsonl", rows))
    (stats,) = read_run(write_jsonl(tmp_path / "t.jsonl", rows[:1]))
    assert stats == TaskStats("1", 2, 1) and stats.pass1 == 0.5


def test_plots_are_png(tmp_path: Path) -> None:
    records = [*run({"1": [1, 0, 1], "2": [0, 0, 1]}), ep("3", 0, status="infra_error")]
    records[0]["tools"] = {"get_order": 2}
    plot_eval(summarize_episodes(records), task_stats(records), tmp_path / "eval.png", title="test")
    plot_compare(compare(run(A), run(B), n_boot=200), tmp_path / "cmp.png")
    for name in ("eval.png", "cmp.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp.png", "eval.png"]  # no temporary left behind


@pytest.mark.parametrize("tool", ["$\\foo$", "order" + chr(0xD800)])
def test_a_tool_name_a_model_made_up_is_drawn_as_written(tmp_path: Path, tool: str) -> None:
    """The tools' bars are labelled with the names the agent called, unknown ones too: no name is math (mathtext
    refused "$\\foo$" as a bad title), and a lone surrogate, which matplotlib cannot take, is shown escaped."""
    records = run({"1": [1]})
    records[0]["tools"] = {tool: 1, "get_order": 2}
    plot_eval(summarize_episodes(records), task_stats(records), tmp_path / "eval.png", title="test")
    assert (tmp_path / "eval.png").read_bytes()[:8] == PNG


# -- the CLI -----------------------------------------------------------------------------------------------------
def test_cli_compare_subprocess(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", run(A))
    write_jsonl(tmp_path / "b.jsonl", run(B))
    cmd = [
        sys.executable,
        "-m",
        "rewardkit.cli",
        "eval",
        "compare",
        "a.jsonl",
        "b.jsonl",
        "--out",
        "c.json",
        "--png",
        "c.png",
        "--boot",
        "2000",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "improved  (3): 5, 6, 7" in done.stdout and "regressed (1): 4" in done.stdout
    result = json.loads((tmp_path / "c.json").read_text())
    assert result["inputs"] == {"a": "a.jsonl", "b": "b.jsonl"}
    assert result["diff"] == pytest.approx(0.2) and result["n_boot"] == 2000
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG
    missing = subprocess.run(
        [*cmd[:5], "nope.jsonl", "b.jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == ["rewardkit eval compare: run A nope.jsonl not found"]


@pytest.mark.parametrize(
    ("files", "argv", "fragment"),
    [
        ({}, ["a.jsonl", "nope.jsonl"], "run B nope.jsonl not found"),
        ({"b.jsonl": b'{"task_id": "1"\n'}, ["a.jsonl", "b.jsonl"], "b.jsonl:1: not valid JSON"),
        (
            {"b.jsonl": b'{"task_id": "99", "trial": 0, "status": "ok", "reward": 1}\n'},
            ["a.jsonl", "b.jsonl"],
            "no task has a valid trial in both runs",
        ),
        ({}, ["a.jsonl", "a.jsonl", "--out", "a.jsonl"], "--out a.jsonl is also an input"),
        ({}, ["a.jsonl", "a.jsonl", "--boot", "0"], "n_boot >= 1"),
    ],
)
def test_cli_user_errors_are_one_line(
    files: dict[str, bytes],
    argv: list[str],
    fragment: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "a.jsonl", run(A))
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert main(["eval", "compare", *argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rewardkit eval compare: ") and fragment in line, line
    assert json.loads((tmp_path / "a.jsonl").read_text().splitlines()[0])["task_id"] == "0"  # input untouched


def test_operation_success_and_gate_traffic() -> None:
    rows = [
        ep(
            "1",
            0,
            call_codes={"OK": 3, "APPROVAL_REQUIRED": 1},
            gates={"requested": 1, "approved": 1, "declined": 0, "hard_gate": 0},
        ),
        ep(
            "2",
            0,
            reward=0.0,
            call_codes={"OK": 1, "HARD_GATE": 2, "APPROVAL_REQUIRED": 1},
            gates={"requested": 1, "approved": 0, "declined": 1, "hard_gate": 2},
        ),
        ep(
            "3",
            0,
            status="infra_error",
            reward=None,
            call_codes={"OK": 9},
            gates={"requested": 9, "approved": 9, "declined": 0, "hard_gate": 0},
        ),  # excluded: says nothing
        ep("4", 0),  # a log written before gates: no call_codes, no gates
    ]
    summary = summarize_episodes(rows)
    # calls: 4 + 4 = 8 over the valid episodes; ok: 3 + 1 = 4; success rate 4 / 8.
    assert summary["operations"] == {"calls": 8, "ok": 4, "success_rate": 0.5}
    # decided requests: 1 approved + 1 declined; approval rate 1 / 2; hard gates 2.
    assert summary["gates"] == {"requested": 2, "approved": 1, "declined": 1, "approval_rate": 0.5, "hard_gate": 2}
    assert summarize_episodes([ep("4", 0)])["operations"]["success_rate"] is None  # no calls: no rate
