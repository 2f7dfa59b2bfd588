"""``rewardkit.runs.episodes.episode_log``: the resumable log of a run's episodes, one JSON line each.

Real files in a temporary directory: appending, resuming, a torn last line, a bad line named by file and line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rewardkit.runs.episodes.episode_log import EpisodeLog, RunError

RUN = "run-a"


def record(task_id: str, trial: int = 0, status: str = "ok", run: str = RUN, **extra: Any) -> dict[str, Any]:
    """A whole record, as ``Scorer.record`` writes one (a log's records are checked field by field on resume;
    this helper once wrote only run, task_id, trial and status, which a resumed log now refuses)."""
    infra = status != "ok"
    return {
        "run": run,
        "task_id": task_id,
        "trial": trial,
        "status": status,
        "reward": None if infra else 1.0,
        "tcr": None if infra else 1.0,
        "termination": "user_sim_error" if infra else "user_stop",
        "turns": 1,
        "tool_calls": 0,
        "tool_errors": 0,
        "tools": {},
        "call_codes": {},
        "error": "down" if infra else None,
        "state_hash": "h",
        "messages": [{"role": "system", "content": "p"}],
        **extra,
    }


def write_lines(path: Path, lines: Sequence[str], newline_at_end: bool = True) -> None:
    path.write_text("\n".join(lines) + ("\n" if newline_at_end else ""), encoding="utf-8")


# --- EpisodeLog ------------------------------------------------------------------------------------


def test_fresh_log_creates_its_directory_and_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "episodes.jsonl"
    log = EpisodeLog(path, RUN, resume=False)
    assert log.records() == [] and log.done() == set()
    assert path.parent.is_dir() and not path.exists()  # nothing written until an episode ends


def test_empty_existing_file_is_a_fresh_log(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text("")
    assert EpisodeLog(path, RUN, resume=False).records() == []


def test_append_writes_one_line_per_record_and_resume_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    log = EpisodeLog(path, RUN, resume=False)
    log.append(record("1", 0))
    log.append(record("1", 1, status="infra_error"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [record("1", 0), record("1", 1, status="infra_error")]
    log.close()  # one writer at a time: the lock is released before the log is opened again
    again = EpisodeLog(path, RUN, resume=True)
    assert sorted((r["task_id"], r["trial"]) for r in again.records()) == [("1", 0), ("1", 1)]


def test_a_lone_surrogate_is_written_escaped_and_read_back(tmp_path: Path) -> None:
    """A model's text may hold a lone surrogate (``json.loads`` makes one of ``"\\ud800"``); its record is written
    as UTF-8, the surrogate escaped, and resuming reads it back as it was (it used to stop the run)."""
    path = tmp_path / "episodes.jsonl"
    lone = chr(0xD800)
    sent = record("1", messages=[{"role": "assistant", "content": f"café {lone}"}], tools={f"get{lone}": 1})
    with EpisodeLog(path, RUN, resume=False) as log:
        log.append(sent)
    assert path.read_bytes().decode("utf-8").count("\\ud800") == 2
    with EpisodeLog(path, RUN, resume=True) as again:
        assert again.records() == [sent]


def test_existing_log_without_resume_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    write_lines(path, [json.dumps(record("1"))])
    before = path.read_bytes()
    with pytest.raises(RunError, match="--resume"):
        EpisodeLog(path, RUN, resume=False)
    assert path.read_bytes() == before


def test_resume_under_another_fingerprint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    write_lines(path, [json.dumps(record("1")), json.dumps(record("2", run="run-b"))])
    with pytest.raises(RunError, match=rf"{path}:2 was written by another run"):
        EpisodeLog(path, RUN, resume=True)


@pytest.mark.parametrize("good", [0, 2])
def test_torn_last_line_is_dropped_and_truncated(tmp_path: Path, good: int) -> None:
    path = tmp_path / "episodes.jsonl"
    complete = [json.dumps(record(str(i))) for i in range(good)]
    torn = json.dumps(record("99"))[:25]  # a crash mid-write: no newline, not JSON
    write_lines(path, [*complete, torn], newline_at_end=False)
    log = EpisodeLog(path, RUN, resume=True)
    assert {r["task_id"] for r in log.records()} == {str(i) for i in range(good)}
    assert path.read_text(encoding="utf-8") == "".join(line + "\n" for line in complete)
    log.append(record("99"))  # the episode in flight runs again and lands on a line of its own
    assert [json.loads(line)["task_id"] for line in path.read_text().splitlines()] == [
        *(str(i) for i in range(good)),
        "99",
    ]


def test_bad_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    write_lines(path, [json.dumps(record("1")), "", "{not json", json.dumps(record("2"))])
    with pytest.raises(RunError, match=rf"{path}:3: not an episode record"):
        EpisodeLog(path, RUN, resume=True)


@pytest.mark.parametrize(
    ("statuses", "done"),
    [
        (["infra_error", "ok"], True),  # a rerun that succeeded
        (["ok", "infra_error"], False),  # the last record wins, whatever it says
        (["infra_error", "infra_error"], False),
    ],
)
def test_last_record_per_task_and_trial_wins(tmp_path: Path, statuses: list[str], done: bool) -> None:
    path = tmp_path / "episodes.jsonl"
    write_lines(path, [json.dumps(record("5", 1, status=s, n=i)) for i, s in enumerate(statuses)])
    log = EpisodeLog(path, RUN, resume=True)
    assert log.records() == [record("5", 1, status=statuses[-1], n=len(statuses) - 1)]
    assert log.done() == ({("5", 1)} if done else set())


def test_done_excludes_infrastructure_errors(tmp_path: Path) -> None:
    log = EpisodeLog(tmp_path / "episodes.jsonl", RUN, resume=False)
    for task_id, trial, status in [("1", 0, "ok"), ("1", 1, "infra_error"), ("2", 0, "ok"), ("3", 0, "infra_error")]:
        log.append(record(task_id, trial, status=status))
    assert log.done() == {("1", 0), ("2", 0)}


@pytest.mark.parametrize("line", ["[1, 2]", '"text"', '{"run": "r"}'])
def test_a_line_that_is_json_but_not_a_record_is_named(tmp_path: Path, line: str) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(RunError, match=r"episodes.jsonl:1: not an episode record"):
        EpisodeLog(path, "r", resume=True)
