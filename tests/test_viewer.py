"""The episode viewer's data: the diffs and checks the run recorded, per-task counts, the verdicts file, and the page.

The page itself is tested in a real browser in tests/test_viewer_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rewardkit.cli import main
from rewardkit.runs.episodes.synthesis import select
from rewardkit.runs.viewer.page import ViewerError, build, read_verdicts, render


def eval_run(tmp_path: Path) -> Path:
    """A real eval: the gold agent on four test tasks, cut at two turns, so some episodes pass and some do not."""
    out = tmp_path / "eval"
    argv = [
        "eval",
        "agent",
        "--agent",
        "gold",
        "--split",
        "test",
        "--limit",
        "4",
        "--trials",
        "2",
        "--max-turns",
        "2",
        "--out-dir",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    return out


def test_the_page_carries_the_logs_counts_and_diffs(tmp_path: Path, capsys) -> None:
    out = eval_run(tmp_path)
    assert main(["view", str(out)]) == 0
    page = (out / "view.html").read_text(encoding="utf-8")
    data = json.loads(page.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0])
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    episodes = [r for r in records if "task_id" in r]
    summary = json.loads((out / "summary.json").read_text())
    assert data["summary"]["episodes"] == len(episodes) == summary["episodes"]["valid"] == 8
    assert data["summary"]["passed"] == sum(r["reward"] == 1.0 for r in episodes)
    assert {t: c["trials"] for t, c in data["tasks"].items()} == {r["task_id"]: 2 for r in episodes}
    for shown in data["episodes"]:  # a passed episode ends in the gold state; one that differs has failed
        assert shown["diff"] == [] if shown["reward"] == 1.0 else True, shown["id"]
        assert shown["reward"] == 0.0 if shown["diff"] else True, shown["id"]
    assert any(shown["diff"] for shown in data["episodes"])  # cut at two turns, some writes never happened
    for shown in data["episodes"]:  # the checks are the reward's: all met exactly where it paid, on a natural ending
        natural = shown["termination"] in ("user_stop", "agent_stop", "user_transfer", "agent_transfer")
        if shown["checks"] is not None and natural:
            assert all(c["passed"] for c in shown["checks"]) == (shown["reward"] == 1.0), shown["id"]
        assert shown["why"].startswith("complete" if shown["reward"] == 1.0 else ("not complete", "no credit")), shown
    assert "http" not in page.split("<script", 1)[0].replace("http-equiv", "")  # nothing loads from a network
    assert f"{out / 'view.html'}: 8 episodes of 4 tasks" in capsys.readouterr().out


def test_the_users_closing_line_is_logged_apart_and_shown_last(tmp_path: Path) -> None:
    # The user's line that ended an episode (its stop) is in the record apart from the messages the agent saw, and
    # last on the page, marked; an episode cut at its turn limit ended on the agent's turn and has none.
    from rewardkit.envs import get_domain

    out = tmp_path / "eval"
    common = ["eval", "agent", "--agent", "gold", "--split", "test", "--limit", "1", "--trials", "1", "--no-progress"]
    assert main([*common, "--out-dir", str(out)]) == 0
    assert main([*common, "--max-turns", "1", "--out-dir", str(tmp_path / "cut")]) == 0
    [stopped] = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    [cut] = [json.loads(line) for line in (tmp_path / "cut" / "episodes.jsonl").read_text().splitlines()]
    assert (stopped["termination"], cut["termination"], cut["closing"]) == ("user_stop", "max_turns", None)
    assert "###STOP###" in stopped["closing"] and stopped["closing"] not in json.dumps(stopped["messages"])
    [shown], [shown_cut] = (build([r], get_domain("retail"), "t")["episodes"] for r in (stopped, cut))
    assert shown["messages"][-1] == {
        "role": "user",
        "calls": [],
        "content": stopped["closing"],
        "mark": "closing closing",
    }
    assert shown_cut["messages"][-1]["role"] != "user"


def test_text_cannot_end_the_embedded_script() -> None:
    view = {
        "title": "t",
        "run": "r",
        "domain": "retail",
        "review": False,
        "summary": {},
        "tasks": {},
        "episodes": [{"messages": [{"content": "</script><script>alert(1)</script>"}]}],
    }
    page = render(view).decode("utf-8")
    # Every < and >, escaped as JSON reads them back.
    escaped = "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"
    assert "</script><script>alert(1)" not in page and escaped in page


def _records() -> list[dict]:
    said = {"role": "assistant", "content": "Done."}
    return [
        {
            "task_id": t,
            "trial": 0,
            "status": "ok",
            "reward": 1.0,
            "termination": "user_stop",
            "messages": [{"role": "user", "content": f"help {t}"}, said],
        }
        for t in ("1", "2", "3")
    ]


def write_verdicts(path: Path, run: str, verdicts: dict) -> Path:
    path.write_text(json.dumps({"run": run, "verdicts": verdicts}), encoding="utf-8")
    return path


def test_a_verdict_lands_only_on_the_episode_it_was_given_on(tmp_path: Path) -> None:
    from rewardkit.runs.viewer.page import episode_digest, verdicts_for

    records = _records()
    # Another log of run r1 holds another episode 2/0 (another conversation): its accept is not this 2/0's.
    elsewhere = {**records[1], "messages": [{"role": "user", "content": "help someone else"}]}
    given = {
        "1/0": {"verdict": "accept", "digest": episode_digest(records[0])},
        "2/0": {"verdict": "accept", "digest": episode_digest(elsewhere)},
        "3/0": {"verdict": "reject", "digest": episode_digest(records[2])},
        "9/0": {"verdict": "accept", "digest": episode_digest(records[0])},  # an episode this log does not hold
    }
    applied, skipped = verdicts_for(records, read_verdicts(write_verdicts(tmp_path / "v.json", "r1", given), "r1"))
    assert (applied, skipped) == ({"1/0": "accept", "3/0": "reject"}, ["2/0"])
    rows, report = select(records, None, applied)
    # 1/0 kept; 3/0 rejected by the person; 2/0 judged on another episode, so nobody judged this one.
    assert (len(rows), report["kept"], report["rejected"]) == (1, 1, {"reviewer_rejected": 1, "unreviewed": 1})
    assert select(records, None)[1]["kept"] == 3  # without verdicts, the rules alone


OLD = "names no episode digest (an older viewer saved it); open the review page it was judged on and save again"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"run": "other", "verdicts": {}}, "judged run 'other', but this synthesis is run 'r1'"),
        ({"run": "r1"}, "no 'verdicts' object"),
        ({"run": "r1", "verdicts": {"1/0": {"verdict": "maybe", "digest": "ab"}}}, "verdicts.1/0.verdict must be"),
        ({"run": "r1", "verdicts": {"1/0": "accept"}}, f"verdicts.1/0 {OLD}"),  # saved before verdicts named theirs
        ({"run": "r1", "verdicts": {"1/0": {"verdict": "accept"}}}, f"verdicts.1/0 {OLD}"),
    ],
)
def test_a_bad_verdicts_file_is_named(tmp_path: Path, content: dict, message: str) -> None:
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(ViewerError, match=re.escape(message)):
        read_verdicts(path, "r1")


def test_synth_names_a_verdict_given_on_another_episode_and_keeps_it_unreviewed(tmp_path: Path, capsys) -> None:
    from rewardkit.runs.viewer.page import episode_digest

    out, episodes, report = tmp_path / "sft.jsonl", tmp_path / "sft.episodes.jsonl", tmp_path / "report.json"
    synth = ["synth", "agent", "--agent", "gold", "--split", "train", "--limit", "2"]
    synth += ["--out", str(out), "--episodes", str(episodes), "--no-progress"]
    assert main(synth) == 0
    first, second = [json.loads(line) for line in episodes.read_text().splitlines() if '"task_id"' in line]
    run, (a, b) = first["run"], (f"{r['task_id']}/{r['trial']}" for r in (first, second))
    given = {
        a: {"verdict": "accept", "digest": episode_digest(first)},
        b: {"verdict": "accept", "digest": episode_digest({"messages": second["messages"][:1]})},  # another log's
    }
    verdicts = write_verdicts(tmp_path / "verdicts.json", run, given)
    capsys.readouterr()
    assert main([*synth, "--resume", "--verdicts", str(verdicts), "--report", str(report)]) == 0
    counts = json.loads(report.read_text())
    assert (counts["kept"], counts["rejected"], counts["verdicts_on_another_episode"]) == (1, {"unreviewed": 1}, [b])
    assert f"verdicts.json: 1 verdict given on another episode with the same id, not applied: {b}" in (
        capsys.readouterr().err
    )


def test_an_episode_shows_the_user_reviews_flags() -> None:
    from rewardkit.envs import get_domain

    flag = {"kind": "unseen_fact", "turn": 1, "evidence": "#W9999917"}
    records = _records()
    records[1]["user_flags"] = [flag, "not a flag"]  # a record from elsewhere: only objects are shown
    data = build(records, get_domain("retail"), "t")
    assert [e["user_flags"] for e in data["episodes"]] == [[], [flag], []]


OK = {"status": "ok", "termination": "user_stop"}
# (the record, the reward's checks, the line the page puts at the top of the episode)
WHY = [
    ({**OK, "reward": 1.0}, [("the final database equals the gold state", True)], "complete: every check passed"),
    (  # the database right, an expected output never said: the first check not met names it
        {**OK, "reward": 0.0},
        [("said '466.75'", False), ("said 'refunded'", False), ("the final database equals the gold state", True)],
        "not complete: said '466.75': not met (and 1 more)",
    ),
    (
        {"status": "ok", "termination": "max_turns", "reward": 0.0},
        [("the final database equals the gold state", True)],
        "no credit: it ended as max_turns; only a stop or a transfer earns credit",
    ),
    (
        {"status": "infra_error", "termination": "user_sim_error", "reward": None},
        None,
        "left out of training: it ended as user_sim_error, the infrastructure's doing, not the agent's",
    ),
]


@pytest.mark.parametrize(("record", "checks", "line"), WHY)
def test_every_episode_says_why_it_scored_what_it_did_in_one_line(record: dict, checks: list | None, line: str) -> None:
    from rewardkit.runs.viewer.page import why

    assert why(record, checks) == line


def test_what_the_run_recorded_is_what_a_replay_of_its_log_finds(tmp_path: Path) -> None:
    # The eval records each episode's checks and diff from its live environment; the viewer replays a log written
    # before runs recorded them. On the same episodes the two agree, field by field.
    from rewardkit.envs import get_domain

    out = eval_run(tmp_path)
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert any(r["diff"] for r in records) and all(r["checks"] for r in records)
    old = [{k: v for k, v in r.items() if k not in ("checks", "diff")} for r in records]
    recorded, replayed = (build(log, get_domain("retail"), "t")["episodes"] for log in (records, old))
    assert [(e["checks"], e["diff"]) for e in replayed] == [(e["checks"], e["diff"]) for e in recorded]
    # The page holds the recorded diff, each side's value as its JSON text.
    assert [e["diff"] for e in recorded] == [
        [{**d, **{k: json.dumps(d[k]) for k in ("agent", "gold") if k in d}} for d in r["diff"]] for r in records
    ]


def test_an_episode_the_log_holds_twice_is_shown_once_as_its_last_record() -> None:
    from rewardkit.envs import get_domain

    first, again = _records()[0], {**_records()[0], "reward": 0.0}  # a resumed log ran it again
    shown = build([first, *_records()[1:], again], get_domain("retail"), "t")["episodes"]
    assert [(e["id"], e["reward"]) for e in shown] == [("1/0", 0.0), ("2/0", 1.0), ("3/0", 1.0)]
