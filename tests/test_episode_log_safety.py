"""The episode log trusts nothing: one writer at a time, every record read back checked field by field
(``file:line`` and what to do), a torn last line dropped whatever its line ends, a failed append naming the
file and leaving no half line, and no NaN ever written."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_episode_log import record

from rewardkit.files.lock import LockedError
from rewardkit.runs.episodes.episode_log import EpisodeLog, RunError

RUN = "run-a"
TODO = "; remove the line, or start over with a new log"


# --- one writer ------------------------------------------------------------------------------------------


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


# --- every record read back is checked ----------------------------------------------------------------------


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


# --- the last line: torn, or whole without its line end --------------------------------------------------


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


# --- appending -----------------------------------------------------------------------------------------------


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
