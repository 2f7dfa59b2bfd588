"""The resumable episode log: one JSONL file of episode records, one writer at a time.

Each finished episode is appended as soon as it ends (``rewardkit.runs.episodes.trials`` runs them, and
``rewardkit.runs.episodes.scorer`` builds each record). A rerun with ``resume=True`` skips every (task, trial)
the log already holds with status ``ok`` and runs the rest again, infrastructure failures included,
so killing a run (or its simulator) loses at most the episodes in flight.

Episode record (one JSON object per line)::

    {"run": "<fingerprint>", "task_id": "12", "trial": 0,
     "status": "ok" | "infra_error",   # infra_error: the user simulator or the agent endpoint failed
     "reward": 1.0 | 0.0 | None,       # task_completion; None for infra_error
     "tcr": 0.0..1.0 | None,           # task_completion_rate
     "termination": "user_stop", "turns": 4, "tool_calls": 3, "tool_errors": 0,
     "tools": {"find_user_id_by_email": 1, …}, "call_codes": {"OK": 3}, "gates": {"requested": 0, …},
     "error": None, "state_hash": "…",
     "checks": [{"check": "the final database equals the gold state", "passed": True}, …],  # the reward's
     "diff": [{"table": "orders", "row": "#W1", "field": "status", "agent": "pending", "gold": "cancelled"}],
     "messages": [...],                # the conversation as the agent saw it
     "closing": "Thanks! ###STOP###"}  # the user's line that ended it, which the agent never saw (or None)

``run`` fingerprints what makes episodes comparable (agent, user simulator, tasks' domain,
system prompt, limits, completion rule, MCP server); resuming a log written under another fingerprint
is refused rather than mixing two experiments.

A log has one writer: ``EpisodeLog`` holds a lock beside it (``files.lock``) from opening to ``close``,
and a second run meets a one-line error. Every record read back is checked field by field
(``records.record_problem``) and named ``file:line`` when it fails. A last line without its newline is
a write the crash cut short and is dropped (the episode runs again), unless it is a whole record: then
it is kept and its line end added, whether the file's line ends are ``\n`` or ``\r\n``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.errors import UserError
from rewardkit.files.jsonl import BOM, dumps, json_problem, kind
from rewardkit.files.lock import WriterLock
from rewardkit.runs.episodes.records import record_problem


class RunError(UserError, ValueError):
    """A log that cannot be started or resumed as asked; the message says what to do."""


def fingerprint(parts: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class EpisodeLog:
    """An append-only JSONL of episode records; the last record of a (task, trial) wins. Held by one run:
    use it as a context manager (or ``close`` it) to release the lock; ``choose`` ends the lock's message."""

    def __init__(self, path: Path, run: str, resume: bool, choose: str = "another --episodes file") -> None:
        self.path, self.run = path, run
        self._lock = threading.Lock()
        self._records: dict[tuple[str, int], dict[str, Any]] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = WriterLock(path, choose).acquire()  # before reading: the other run may be appending
        try:
            if path.exists() and path.stat().st_size > 0:
                if not resume:
                    raise RunError(f"{path} already holds episodes; pass --resume to continue that run, or remove it")
                self._load()
        except BaseException:
            self._writer.release()
            raise

    def close(self) -> None:
        self._writer.release()

    def __enter__(self) -> EpisodeLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bad(self, number: int, problem: str) -> RunError:
        return RunError(
            f"{self.path}:{number}: not an episode record ({problem}); remove the line, or start over with a new log"
        )

    def _record(self, number: int, raw: bytes, last: bool) -> dict[str, Any] | None:
        """The line's checked record; None for a blank line, or for a ``last`` line cut short by a crash."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if last:
                return None  # cut inside a multi-byte character
            raise self._bad(number, f"not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1})") from None
        text = text.removeprefix(BOM) if number == 1 else text
        if not text.strip():
            return None
        record, problem = json_problem(text)  # strict: NaN and Infinity are not JSON
        if problem is not None:
            if last:
                return None
            raise self._bad(number, problem)
        if not isinstance(record, dict):
            raise self._bad(number, f"expected a JSON object, got {kind(record)}")
        if isinstance(record.get("run"), str) and record["run"] != self.run:
            raise RunError(
                f"{self.path}:{number} was written by another run (agent, user, tasks or limits differ); "
                "resume with the same options, or write to a new file"
            )
        problem = record_problem(record, log=True)
        if problem is not None:
            raise self._bad(number, problem)
        return record

    def _load(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")  # \r\n too: the \r is whitespace to JSON
        tail = lines.pop()  # b"" when the file ends with a line end; else the last write, maybe cut short
        for number, raw in enumerate(lines, 1):
            if (record := self._record(number, raw, last=False)) is not None:
                self._records[(record["task_id"], record["trial"])] = record
        if not tail.strip():
            return
        record = self._record(len(lines) + 1, tail, last=True)
        if record is None:  # the episode in flight when the run died: dropped, it runs again
            os.truncate(self.path, len(data) - len(tail))
            return
        self._records[(record["task_id"], record["trial"])] = record
        with self.path.open("ab") as f:  # a whole record that lost only its line end (or the \n of \r\n)
            f.write(b"\n")

    def done(self) -> set[tuple[str, int]]:
        return {key for key, r in self._records.items() if r["status"] == "ok"}

    def append(self, record: dict[str, Any]) -> None:
        data = (dumps(record, allow_nan=False) + "\n").encode("utf-8")
        with self._lock:
            try:
                with self.path.open("ab") as f:
                    start = f.seek(0, os.SEEK_END)
                    try:
                        f.write(data)
                        f.flush()
                    except OSError:
                        with contextlib.suppress(OSError):  # never leave half a line for the next append
                            f.truncate(start)
                        raise
            except OSError as exc:
                raise RunError(f"cannot append to the episode log {self.path}: {exc.strerror or exc}") from None
            self._records[(record["task_id"], record["trial"])] = record

    def records(self) -> list[dict[str, Any]]:
        return list(self._records.values())

    def resume_hint(self) -> str:
        return (
            f"{len(self._records)} finished episode(s) are kept in {self.path}; rerun the same command "
            "with --resume to run the rest"
        )
