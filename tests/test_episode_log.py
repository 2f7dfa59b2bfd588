"""``rewardkit.runs.episodes.episode_log``: the resumable log of a run's episodes, one JSON line each.

Real files in a temporary directory: appending, resuming, a torn last line, a bad line named by file and line.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rewardkit.files.lock import LockedError
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


# The episode log trusts nothing: one writer at a time, every record read back checked field by field
# (``file:line`` and what to do), a torn last line dropped whatever its line ends, a failed append naming the
# file and leaving no half line, and no NaN ever written.

TODO = "; remove the line, or start over with a new log"


def test_a_second_writer_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    first = EpisodeLog(path, RUN, resume=False, choose="another --out-dir")
    with pytest.raises(LockedError) as info:
        EpisodeLog(path, RUN, resume=True)
    assert str(info.value) == (
        f"{path} is being written by another run (pid {os.getpid()}); wait for it or choose another --episodes file"
    )
    first.close()
    assert not (tmp_path / "episodes.jsonl.lock").exists()  # nothing left beside the log
    with EpisodeLog(path, RUN, resume=True) as again:  # released: the next run may take it
        again.append(record("1"))
    assert [p.name for p in tmp_path.iterdir()] == ["episodes.jsonl"]


def test_a_refused_open_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record("1")) + "\n", encoding="utf-8")
    with pytest.raises(RunError, match="--resume"):
        EpisodeLog(path, RUN, resume=False)
    EpisodeLog(path, RUN, resume=True).close()  # not locked by the failed attempt


HOLD = """
import sys, time
from pathlib import Path
from rewardkit.runs.episodes.episode_log import EpisodeLog
log = EpisodeLog(Path(sys.argv[1]), "run-a", resume=False)
print("ready", flush=True)
time.sleep(60)
"""


def test_another_process_holding_the_log_is_named_by_pid_and_a_dead_one_is_not(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        with pytest.raises(LockedError, match=rf"is being written by another run \(pid {holder.pid}\)"):
            EpisodeLog(path, RUN, resume=True)
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, its lock file stays behind
        holder.wait()
    assert (tmp_path / "episodes.jsonl.lock").exists()
    EpisodeLog(path, RUN, resume=True).close()  # the kernel dropped the dead holder's lock: taken over


def line_with(**change: Any) -> str:
    return json.dumps({k: v for k, v in {**record("2"), **change}.items() if v is not ...})


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (line_with(reward=...), "no 'reward' field"),  # was a KeyError in synth --resume
        (line_with(reward="1.0"), "an ok episode needs a numeric 'reward' in [0, 1], got a string ('1.0')"),
        (line_with(reward=2.0), "an ok episode needs a numeric 'reward' in [0, 1], got a number (2.0)"),
        (line_with(tcr=1.5), "'tcr' must be a number in [0, 1] or null, got a number (1.5)"),
        (line_with(tcr=float("nan")), "not valid JSON (NaN is not valid JSON)"),  # json.dumps writes NaN
        (line_with(tcr=float("inf")), "not valid JSON (Infinity is not valid JSON)"),
        (line_with(trial=-1), "'trial' must be an integer from 0 to 2^53, got a number (-1)"),
        (line_with(trial=True), "'trial' must be an integer from 0 to 2^53, got a boolean (true)"),
        (line_with(task_id=5), "'task_id' must be a non-empty string, got a number (5)"),
        (line_with(status="done"), "'status' must be one of ok, infra_error, got a string ('done')"),
        (line_with(status="infra_error", reward="x"), "'reward' must be a number in [0, 1] or null, got a string"),
        (line_with(turns="3"), "'turns' must be an integer from 0 to 2^53, or null, got a string ('3')"),
        (line_with(tools={"x": -1}), "'tools' must be an object of integer counts from 0 to 2^53, got an object"),
        (line_with(messages="hi"), "'messages' must be a list of messages, each an object with a string 'role'"),
        (line_with(termination=""), "'termination' must be a non-empty string, got an empty string"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('{"run": "run-a", "task_id": "2"', "not valid JSON"),  # a cut line that is not the last one
    ],
)
def test_a_bad_record_names_file_line_field_and_what_to_do(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(record("1")) + "\n" + line + "\n" + json.dumps(record("3")) + "\n", encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(RunError) as info:
        EpisodeLog(path, RUN, resume=True)
    message = str(info.value)
    assert message.startswith(f"{path}:2: not an episode record (") and message.endswith(TODO), message
    assert problem in message, message
    assert path.read_bytes() == before  # refused, not repaired


A = json.dumps(record("1"))


B = json.dumps(record("2", messages=[{"role": "user", "content": "é"}]), ensure_ascii=False)  # as the log writes


CUT_IN_E = B.encode()[: B.encode().index("é".encode()) + 1]  # the first of é's two bytes


@pytest.mark.parametrize(
    ("content", "kept", "after"),
    [
        (f"{A}\n{B}\n".encode(), ["1", "2"], f"{A}\n{B}\n".encode()),
        (f"{A}\n{B[:25]}".encode(), ["1"], f"{A}\n".encode()),  # cut mid-record: dropped, it runs again
        (f"{A}\n{B}".encode(), ["1", "2"], f"{A}\n{B}\n".encode()),  # whole, only the \n lost: kept
        (f"{A}\r\n{B}\r\n".encode(), ["1", "2"], f"{A}\r\n{B}\r\n".encode()),
        (f"{A}\r\n{B}\r".encode(), ["1", "2"], f"{A}\r\n{B}\r\n".encode()),  # cut between \r and \n: kept
        (f"{A}\r\n{B[:25]}".encode(), ["1"], f"{A}\r\n".encode()),
        (f"{A}\n".encode() + CUT_IN_E, ["1"], f"{A}\n".encode()),  # cut inside a UTF-8 character
        (b"\xef\xbb\xbf" + f"{A}\n".encode(), ["1"], b"\xef\xbb\xbf" + f"{A}\n".encode()),  # a BOM is fine
    ],
    ids=["lf", "lf-torn", "lf-whole", "crlf", "crlf-cut-at-cr", "crlf-torn", "torn-utf8", "bom"],
)
def test_the_last_line_rule(tmp_path: Path, content: bytes, kept: list[str], after: bytes) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(content)
    with EpisodeLog(path, RUN, resume=True) as log:
        assert sorted(r["task_id"] for r in log.records()) == kept
        assert path.read_bytes() == after
        log.append(record("9"))  # the next episode lands on a line of its own
    with EpisodeLog(path, RUN, resume=True) as again:
        assert sorted(r["task_id"] for r in again.records()) == sorted([*kept, "9"])


class HalfWriter:
    """A file that takes the first 10 bytes of a write, then the disk is full."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __enter__(self) -> HalfWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.close()

    def write(self, data: bytes) -> int:
        self.real.write(data[:10])
        self.real.flush()
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_names_the_log_and_leaves_no_half_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "episodes.jsonl"
    with EpisodeLog(path, RUN, resume=False) as log:
        log.append(record("1"))
        before = path.read_bytes()
        real_open = Path.open
        monkeypatch.setattr(Path, "open", lambda self, *a, **k: HalfWriter(real_open(self, *a, **k)))
        with pytest.raises(RunError) as info:
            log.append(record("2"))
        monkeypatch.undo()
        assert str(info.value) == f"cannot append to the episode log {path}: No space left on device"
        assert path.read_bytes() == before  # the 10 bytes are gone again
        assert [r["task_id"] for r in log.records()] == ["1"]  # not counted as logged


def test_nan_is_never_written(tmp_path: Path) -> None:
    with EpisodeLog(tmp_path / "episodes.jsonl", RUN, resume=False) as log:
        with pytest.raises(ValueError, match="not JSON compliant"):  # a bug upstream; refused, not written
            log.append(record("1", tcr=float("nan")))
        assert not log.path.exists() or log.path.read_bytes() == b""
