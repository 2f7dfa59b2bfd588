"""``rewardkit synth agent --judge``: a judge's verdict after the rules, fault labels, and the person's verdicts.

The judge is real HTTP (``sim_server.SimServer``) answering scripted verdicts; the agent is ``gold`` and the user
``scripted`` on the built-in retail tasks, so every episode passes the rules and what is kept is the judge's call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sim_server import SimServer, free_port

from rewardkit.cli import main
from rewardkit.data_builders import trajectories
from rewardkit.envs.termination import EXCLUDED
from rewardkit.loop.judge import Verdict
from rewardkit.runs.episodes import synthesis
from rewardkit.runs.episodes.faults import FAULTS, PARTIES, fault_of
from rewardkit.runs.episodes.synthesis import select

ACCEPT = '{"verdict": "accept", "reason": "policy followed", "fault": null}'
GARBAGE = "I think this trajectory is fine."  # no JSON: refused, asked again
TASK = re.compile(r"^# Task (\S+)", re.MULTILINE)


def reject(reason: str, fault: str | None = "agent") -> str:
    return json.dumps({"verdict": "reject", "reason": reason, "fault": fault})


def task_of(body: dict[str, Any]) -> str:
    return TASK.search(body["messages"][1]["content"]).group(1)


def refused(body: dict[str, Any]) -> bool:
    """Whether this request re-asks after a refused answer (the role's second attempt and later)."""
    return body["messages"][-1]["content"].startswith("Your answer was refused")


def synth(capsys: pytest.CaptureFixture[str], cwd: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """``rewardkit synth agent`` in this process on gold + scripted; the exit code, the report and stderr."""
    capsys.readouterr()
    code = main(
        [
            "synth",
            "agent",
            "--no-progress",
            "--agent",
            "gold",
            "--user",
            "scripted",
            "--out",
            str(cwd / "sft.jsonl"),
            "--report",
            str(cwd / "report.json"),
            *args,
        ]
    )
    err = capsys.readouterr().err
    report = json.loads((cwd / "report.json").read_text(encoding="utf-8")) if code == 0 else {}
    return code, report, err


def judge_ledger(report: dict[str, Any]) -> dict[str, Any]:
    (found,) = [entry for entry in report["ledger"] if entry["role"] == "judge"]
    return found


# reply, tasks, then what the report must say: rejected, faults (agent, user, tool, none), judge requests, invalid
CASES: dict[str, tuple[Callable[[dict], str] | str, str, dict[str, int], tuple[int, ...], int, int]] = {
    # two tasks, one trial each: both accepted, kept 2 = read 2 - rejected 0; one call per trajectory
    "accept": (ACCEPT, "10,50", {}, (0, 0, 0, 0), 2, 0),
    # the judge rejects both and blames the simulated user: judge_rejected 2, faults user 2
    "reject": (reject("the user changed its mind", "user"), "10,50", {"judge_rejected": 2}, (0, 2, 0, 0), 2, 0),
    # a rejection with no fault named is the agent's
    "reject_no_fault": (reject("guessed the order", None), "10", {"judge_rejected": 1}, (1, 0, 0, 0), 1, 0),
    # garbage, then (asked again) an accept: 2 requests, 1 invalid, kept 1
    "garbage_then_accept": (lambda b: ACCEPT if refused(b) else GARBAGE, "10", {}, (0, 0, 0, 0), 2, 1),
    # garbage every time: 3 attempts = 3 requests, 3 invalid, then judge_error (nobody's fault)
    "garbage_always": (GARBAGE, "10", {"judge_error": 1}, (0, 0, 0, 1), 3, 3),
    # per task: 50 rejected as the tool's fault, 10 accepted: kept 1 + rejected 1 = read 2
    "per_task": (
        lambda b: reject("stale stock", "tool") if task_of(b) == "50" else ACCEPT,
        "10,50",
        {"judge_rejected": 1},
        (0, 0, 1, 0),
        2,
        0,
    ),
}


@pytest.mark.parametrize(("reply", "tasks", "rejected", "faults", "requests", "invalid"), CASES.values(), ids=CASES)
def test_the_judge_decides_what_the_rules_passed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    reply: Any,
    tasks: str,
    rejected: dict[str, int],
    faults: tuple[int, ...],
    requests: int,
    invalid: int,
) -> None:
    with SimServer(reply=reply, models=["judge-m"]) as server:
        code, report, err = synth(capsys, tmp_path, "--tasks", tasks, "--judge", server.base_url)
        bodies = list(server.requests)
    assert code == 0, err
    read = len(tasks.split(","))
    assert report["read"] == read == report["kept"] + sum(report["rejected"].values())
    assert report["rejected"] == rejected and report["kept"] == read - sum(rejected.values())
    assert report["faults"] == dict(zip(PARTIES, faults, strict=True))
    assert sum(report["faults"].values()) == sum(report["rejected"].values())
    for stats in report["per_task"].values():  # per task too: faults sum to that task's rejections
        assert sum(stats["faults"].values()) == sum(stats["rejected"].values())
    ledger = judge_ledger(report)
    assert (ledger["requests"], ledger["invalid"], ledger["endpoint"]) == (requests, invalid, server.base_url)
    assert report["judge"]["model"] == "judge-m"  # the one model the server lists
    assert len((tmp_path / "sft.jsonl").read_text(encoding="utf-8").splitlines()) == report["kept"]
    # Every verdict is kept with its reason, keyed by episode id.
    assert set(report["judged"]) == {f"{t}/0" for t in tasks.split(",")}
    for eid, verdict in report["judged"].items():
        said = {"judge_error": "error", "judge_rejected": "reject"}.get(
            next(iter(report["per_task"][eid.split("/")[0]]["rejected"]), ""), "accept"
        )
        assert verdict["verdict"] == said and verdict["reason"], eid
    if "judge_error" in rejected:
        assert "no acceptable answer in 3 attempt(s)" in report["judged"]["10/0"]["reason"]
        assert "rerun with --resume to judge them again" in err
    assert all(b["messages"][1]["content"].startswith("# Task ") for b in bodies)


def test_the_judge_reads_the_criteria_and_the_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SimServer(reply=ACCEPT) as server:
        code, report, err = synth(capsys, tmp_path, "--tasks", "24", "--judge", server.base_url, "--judge-model", "m")
        (body,) = server.requests
    assert code == 0 and report["kept"] == 1, err
    system, user = (m["content"] for m in body["messages"])
    assert '"verdict": "accept" or "reject"' in system
    for part in (
        "## The customer's scenario",
        "## Outputs the agent must tell the customer",
        "- polyester",
        "## Assertions the conversation must satisfy",
        "materials of the two t-shirts",
        "# The transcript",
        "[user] ",
        "[assistant] ",
    ):
        assert part in user, part
    assert "[system]" not in user  # the policy is left out


def test_trajectories_are_judged_concurrently_and_decided_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Replies wait (at most 5 s) until two requests are in flight: they overlap, or the test takes 5 s more.
    with SimServer(reply=ACCEPT, hold_until=2, delay_s=5.0, models=["m"]) as server:
        code, report, err = synth(capsys, tmp_path, "--tasks", "50,10", "--workers", "2", "--judge", server.base_url)
        assert server.max_in_flight == 2
    assert code == 0 and report["kept"] == 2, err
    assert list(report["per_task"]) == ["10", "50"] and list(report["judged"]) == ["10/0", "50/0"]


def test_a_judge_that_is_down_is_a_judge_error_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    code, report, err = synth(
        capsys, tmp_path, "--tasks", "10,50", "--judge", url, "--judge-model", "m", "--judge-retries", "0"
    )
    assert code == 0, err
    # read 2 = kept 0 + judge_error 2; nobody's fault (infrastructure)
    assert (report["kept"], report["rejected"]) == (0, {"judge_error": 2})
    assert report["faults"] == {"agent": 0, "user": 0, "tool": 0, "none": 2}
    assert judge_ledger(report)["failures"] == 2 and "connection failed" in report["judged"]["10/0"]["reason"]
    assert "2 trajectory(ies) got no valid verdict from the judge" in err and "--resume" in err


def test_resume_judges_again_and_the_cache_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = str(tmp_path / "judge.sqlite")
    with SimServer(reply=ACCEPT, models=["m"]) as server:
        first = synth(capsys, tmp_path, "--tasks", "10,50", "--judge", server.base_url, "--judge-cache", cache)
        again = synth(
            capsys, tmp_path, "--tasks", "10,50", "--judge", server.base_url, "--judge-cache", cache, "--resume"
        )
        assert server.count == 2  # the first run's two calls; the rerun sent none
    assert first[0] == again[0] == 0, again[2]
    assert (judge_ledger(first[1])["requests"], judge_ledger(again[1])["cache_hits"]) == (2, 2)
    assert again[1]["kept"] == 2 and again[1]["run"] == first[1]["run"]  # the judge is not part of the run
    # Without the cache, the resumed run asks a new judge, which rejects: no episode reran, the verdict changed.
    with SimServer(reply=reject("no confirmation asked")) as server:
        code, report, err = synth(
            capsys, tmp_path, "--tasks", "10,50", "--judge", server.base_url, "--judge-model", "m", "--resume"
        )
    assert code == 0 and report["rejected"] == {"judge_rejected": 2}, err
    assert report["judged"]["50/0"] == {"verdict": "reject", "reason": "no confirmation asked", "fault": "agent"}


def test_the_judge_and_the_person_must_both_accept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = synth(capsys, tmp_path, "--tasks", "10,50,24")  # the rules alone: kept 3
    assert code == 0 and report["kept"] == 3, err
    from rewardkit.runs.viewer.page import episode_digest

    logged = [json.loads(line) for line in (tmp_path / "sft.episodes.jsonl").read_text().splitlines()]
    digests = {f"{r['task_id']}/{r['trial']}": episode_digest(r) for r in logged if "task_id" in r}
    given = {"10/0": "accept", "50/0": "accept", "24/0": "reject"}  # each on its episode, as the viewer saves it
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(
        json.dumps(
            {"run": report["run"], "verdicts": {k: {"verdict": v, "digest": digests[k]} for k, v in given.items()}}
        ),
        encoding="utf-8",
    )
    with SimServer(reply=lambda b: reject("wrong item") if task_of(b) == "50" else ACCEPT) as server:
        code, report, err = synth(
            capsys,
            tmp_path,
            "--tasks",
            "10,50,24",
            "--resume",
            "--verdicts",
            str(verdicts),
            "--judge",
            server.base_url,
            "--judge-model",
            "m",
        )
    assert code == 0, err
    # 10: both accept, kept; 50: the judge rejects (the person's accept does not save it); 24: the judge accepts,
    # the person rejects. read 3 = kept 1 + judge_rejected 1 + reviewer_rejected 1; faults agent 1 + none 1.
    assert (report["read"], report["kept"]) == (3, 1)
    assert report["rejected"] == {"judge_rejected": 1, "reviewer_rejected": 1}
    assert report["faults"] == {"agent": 1, "user": 0, "tool": 0, "none": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge-model", "m"], "--judge-model configures the judge: add --judge URL"),
        (["--judge-cache", "j.sqlite"], "--judge-cache configures the judge: add --judge URL"),
        (["--judge", "ftp://x/v1"], "--judge 'ftp://x/v1': must be an http(s):// URL"),
        # down, and no --judge-model: the one model it serves cannot be listed
        (["--judge", "http://127.0.0.1:1/v1"], "--judge http://127.0.0.1:1/v1: cannot list its models"),
        (["--judge", "http://127.0.0.1:1/v1", "--judge-model", "m", "--judge-retries", "-1"], "--judge-retries"),
    ],
)
def test_bad_judge_options_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = synth(capsys, tmp_path, "--tasks", "10", *args)
    assert code == 2 and message in err, err
    assert not (tmp_path / "sft.episodes.jsonl").exists()  # before any episode ran


def test_every_rejection_reason_has_a_fault_label() -> None:
    reasons = (
        {t.value for t in EXCLUDED}
        | {trajectories.MALFORMED, trajectories.EMPTY_TURN, trajectories.NO_AGENT_TURN}
        | {
            synthesis.USER_FLAGGED,
            synthesis.TASK_FAILED,
            synthesis.DUPLICATE,
            synthesis.REVIEWER_REJECTED,
            synthesis.UNREVIEWED,
            synthesis.JUDGE_REJECTED,
            synthesis.JUDGE_ERROR,
        }
    )
    assert reasons == {key.split("/")[0] for key in FAULTS} and set(FAULTS.values()) <= set(PARTIES)
    assert fault_of("task_failed", "user_out_of_scope") == "user" and fault_of("task_failed", "max_turns") == "agent"
    assert fault_of("judge_rejected", "user_stop", "tool") == "tool"
    with pytest.raises(ValueError, match="no fault label for the rejection reason 'mystery'"):
        fault_of("mystery", "user_stop")


def rec(
    task: str,
    trial: int,
    messages: list[dict],
    status: str = "ok",
    reward: float | None = 1.0,
    termination: str = "user_stop",
) -> dict[str, Any]:
    return {
        "task_id": task,
        "trial": trial,
        "status": status,
        "reward": reward,
        "termination": termination,
        "messages": messages,
    }


def said(n: int, text: str = "Done.") -> list[dict]:
    return [{"role": "user", "content": f"help {n}"}, {"role": "assistant", "content": text}]


def test_select_labels_every_rejection_and_the_labels_reconcile() -> None:
    broken = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "<tool_call>{broken</tool_call>"}]
    records = [
        rec("1", 0, said(1), "infra_error", None, "user_sim_error"),  # user
        rec("1", 1, said(1), "infra_error", None, "agent_error"),  # agent
        rec("1", 2, said(1), "infra_error", None, "env_error"),  # tool
        rec("1", 3, said(1), "infra_error", None, "tool_sim_error"),  # tool
        rec("2", 0, said(2), reward=0.0, termination="max_turns"),  # task_failed: agent
        rec("2", 1, said(2), reward=0.0, termination="user_out_of_scope"),  # task_failed, the user's ending: user
        rec("2", 2, broken),  # malformed_tool_call: agent
        rec("2", 3, [{"role": "user", "content": "bye"}]),  # no_agent_turn: user
        rec("3", 0, said(3)),  # judge accepts, person accepts: kept
        rec("3", 1, said(3)),  # duplicate of the kept one: none
        rec("4", 0, said(4)),  # judge rejects, fault tool
        rec("4", 1, said(4, "Other.")),  # judge rejects, no fault named: agent
        rec("5", 0, said(5)),  # judge error: none
        rec("6", 0, said(6)),  # judge accepts, person rejects: none
        rec("6", 1, said(6, "Other.")),  # judge accepts, nobody reviewed: none
    ]
    ok = Verdict(True, "ok", None)
    judgements = {
        "3/0": ok,
        "3/1": ok,
        "4/0": Verdict(False, "r", "tool"),
        "4/1": Verdict(False, "r", None),
        "5/0": "judge http://j: down",
        "6/0": ok,
        "6/1": ok,
    }
    rows, report = select(records, None, {"3/0": "accept", "6/0": "reject"}, judgements)
    # read 15 = kept 1 + rejected 14; faults: agent 4 (agent_error, max_turns, malformed, 4/1) + user 3
    # (user_sim_error, out of scope, no_agent_turn) + tool 3 (env_error, tool_sim_error, 4/0) + none 4 = 14
    assert (report["read"], report["kept"], len(rows)) == (15, 1, 1)
    assert sum(report["rejected"].values()) == 14
    assert report["faults"] == {"agent": 4, "user": 3, "tool": 3, "none": 4}
    assert {t: s["faults"] for t, s in report["per_task"].items()} == {
        "1": {"agent": 1, "user": 1, "tool": 2, "none": 0},
        "2": {"agent": 2, "user": 2, "tool": 0, "none": 0},
        "3": {"agent": 0, "user": 0, "tool": 0, "none": 1},
        "4": {"agent": 1, "user": 0, "tool": 1, "none": 0},
        "5": {"agent": 0, "user": 0, "tool": 0, "none": 1},
        "6": {"agent": 0, "user": 0, "tool": 0, "none": 2},
    }
    assert report["judged"]["5/0"] == {"verdict": "error", "reason": "judge http://j: down", "fault": None}
    assert "3/1" not in report["judged"]  # a duplicate of a kept row is not the judge's to decide


def test_an_episode_whose_user_the_review_flagged_is_not_taught_whatever_it_scored() -> None:
    flag = {"kind": "unseen_fact", "turn": 1, "evidence": "#W9999917"}
    records = [
        {**rec("1", 0, said(1)), "user_flags": [flag]},  # scored 1.0, but its user invented an order
        {**rec("1", 1, said(1), reward=0.0), "user_flags": [flag]},  # failed, and its user erred: the user's fault
        rec("1", 2, said(1, "Done, again.")),  # clean: kept
    ]
    rows, report = select(records, None)
    assert (report["kept"], report["rejected"], report["faults"]["user"]) == (1, {"user_flagged": 2}, 2)
    assert len(rows) == 1
