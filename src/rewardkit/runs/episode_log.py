"""K trials of every task through the shared agent <-> user <-> database loop, resumably.

The engine under ``rewardkit synth`` and ``rewardkit eval``: each finished episode is appended
to a JSONL log as soon as it ends, scored by the same rewards GRPO trains with
(``TaskCompletion``, ``TaskCompletionRate``). A rerun with ``resume=True`` skips every
(task, trial) the log already holds with status ``ok`` and runs the rest again, infrastructure
failures included, so killing a run (or its simulator) loses at most the episodes in flight.

Episode record (one JSON object per line)::

    {"run": "<fingerprint>", "task_id": "12", "trial": 0,
     "status": "ok" | "infra_error",   # infra_error: the user simulator or the agent endpoint failed
     "reward": 1.0 | 0.0 | None,       # task_completion; None for infra_error
     "tcr": 0.0..1.0 | None,           # task_completion_rate
     "termination": "user_stop", "turns": 4, "tool_calls": 3, "tool_errors": 0,
     "tools": {"find_user_id_by_email": 1, …}, "call_codes": {"OK": 3}, "gates": {"requested": 0, …},
     "error": None, "state_hash": "…",
     "messages": [...]}                # the conversation as the agent saw it

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
import math
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.envs import Domain
from rewardkit.envs.approvals import agent_rows, gate_counts
from rewardkit.envs.outcomes import task_check
from rewardkit.envs.termination import EXCLUDED
from rewardkit.files.jsonl import BOM, json_problem, kind
from rewardkit.files.lock import WriterLock
from rewardkit.loop.agents import Agent
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import EpisodeResult, run_episodes
from rewardkit.loop.endpoint import EndpointConfigError
from rewardkit.loop.user_sim.base import UserSimulator
from rewardkit.rewards import TaskCompletion, TaskCompletionRate
from rewardkit.runs.records import record_problem

HINT = "rewardkit_resume_hint"  # the attribute of an exception that stopped run_trials: how to resume


def resume_hint(exc: BaseException) -> str | None:
    """What to tell the user about the episodes a stopped run kept, if ``exc`` stopped one."""
    return getattr(exc, HINT, None)


class RunError(ValueError):
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
        return RunError(f"{self.path}:{number}: not an episode record ({problem}); remove the line, or start over "
                        "with a new log")  # fmt: skip

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
        data = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
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
        return (f"{len(self._records)} finished episode(s) are kept in {self.path}; rerun the same command "
                "with --resume to run the rest")  # fmt: skip


@dataclass(frozen=True)
class TrialPlan:
    domain: Domain
    tasks: Sequence[Mapping[str, Any]]
    trials: int
    make_agent: Callable[[Mapping[str, Any]], Agent]
    simulator: UserSimulator
    limits: RolloutLimits
    system: str | None = None  # None: the domain's policy
    workers: int = 8
    require_outputs: bool = True  # TaskCompletion's rule: tau2's (true) or MUA-RL's database-only (false)


class Scorer:
    """The training rewards, applied to one finished episode."""

    def __init__(self, domain: str, require_outputs: bool) -> None:
        self.domain = domain
        self.completion = TaskCompletion(config={"task_completion": {"require_outputs": require_outputs}})
        self.rate = TaskCompletionRate()

    def record(self, result: EpisodeResult, task: Mapping[str, Any], trial: int, run: str) -> dict[str, Any]:
        infos = result.infos
        excluded = infos["termination"] in EXCLUDED  # str-valued members: the stored value matches
        agent_calls = agent_rows(infos["audit"])  # not the user's approvals
        columns = {"messages": [result.messages], "task": [task], "domain": [self.domain], "rollout_infos": [infos]}
        reward = None if excluded else self.completion([""], **columns)[0]
        tcr = None if excluded else self.rate([""], **columns)[0]
        tcr = tcr if tcr is None or math.isfinite(tcr) else None  # an undefined rate is null, never NaN
        return {
            "run": run, "task_id": result.task_id, "trial": trial,
            "status": "infra_error" if excluded else "ok", "reward": reward, "tcr": tcr,
            "termination": infos["termination"], "turns": infos["turns"], "tool_calls": infos["tool_calls"],
            "tool_errors": infos["tool_errors"], "tools": dict(Counter(str(a["tool"]) for a in agent_calls)),
            "call_codes": dict(Counter(str(a["code"]) for a in agent_calls)), "gates": gate_counts(infos["audit"]),
            "error": infos["error"], "state_hash": infos["state_hash"], "messages": result.messages,
        }  # fmt: skip


def run_trials(plan: TrialPlan, log: EpisodeLog, progress: bool = True, label: str = "episodes") -> list[dict]:
    """Run every (task, trial) of the plan the log lacks, ``plan.workers`` at a time; return the plan's records
    (a log resumed with fewer tasks or trials keeps the others, but they are not this run's)."""
    scorer = Scorer(plan.domain.name, plan.require_outputs)
    done = log.done()
    keys = {(str(t["id"]), k) for t in plan.tasks for k in range(plan.trials)}
    todo = [(t, k) for t in plan.tasks for k in range(plan.trials) if (str(t["id"]), k) not in done]

    with _Bar(len(todo), len(done), label, progress) as advance:

        def logged(i: int, result: EpisodeResult) -> None:
            task, trial = todo[i]
            record = scorer.record(result, task, trial, log.run)
            log.append(record)
            advance(record)

        tasks = [task for task, _ in todo]
        limits, workers = plan.limits, plan.workers
        try:
            run_episodes(plan.domain, tasks, plan.make_agent, plan.simulator, limits, workers, plan.system, logged)
        except EndpointConfigError:  # a wrong model name or key: the same command cannot resume, fix the options
            raise
        except BaseException as exc:  # interrupted, or a fault: every finished episode is in the log already
            with contextlib.suppress(AttributeError):  # for the command to say (the agent chain reruns a stage whole)
                setattr(exc, HINT, log.resume_hint())
            raise
    return [r for r in log.records() if (r["task_id"], r["trial"]) in keys]


class _Bar:
    """A rich progress bar on stderr with running success and infrastructure-error counts."""

    def __init__(self, total: int, skipped: int, label: str, enabled: bool) -> None:
        self.total, self.skipped, self.label, self.enabled = total, skipped, label, enabled
        self.ok = self.infra = 0

    def __enter__(self) -> Callable[[dict[str, Any]], None]:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"), console=Console(file=sys.stderr), disable=not self.enabled,
        )  # fmt: skip
        resumed = f" ({self.skipped} done before)" if self.skipped else ""
        self.task = self.progress.add_task(f"{self.label}{resumed}", total=self.total, stats="")
        self.progress.start()
        return self.advance

    def advance(self, record: dict[str, Any]) -> None:
        self.ok += record["reward"] == 1.0
        self.infra += record["status"] == "infra_error"
        self.progress.update(self.task, advance=1, stats=f"completed {self.ok}  infra errors {self.infra}")

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def select_tasks(
    domain: Domain, split: str, task_ids: Sequence[str] | None, limit: int | None
) -> tuple[list[dict], dict[str, str]]:
    """The split's usable tasks in split order, narrowed to ``task_ids`` and cut to the first ``limit``; and the
    unusable ones left out, id -> why (the task checks and the gold replay of :mod:`rewardkit.envs.outcomes`).

    A task named in ``task_ids`` that is unusable is an error: it was asked for by name.
    """
    splits = domain.splits()
    if split not in splits:
        raise RunError(f"--split {split!r}: {domain.name} has splits {', '.join(sorted(splits))}")
    tasks = domain.tasks()
    ids = [i for i in splits[split] if i in tasks]
    if task_ids:
        unknown = sorted(set(task_ids) - set(ids))
        if unknown:
            raise RunError(f"--tasks: {', '.join(unknown)} not in the {split} split of {domain.name}")
        ids = [i for i in ids if i in set(task_ids)]
    unusable = {}
    for i in ids:
        problem = task_check(tasks[i], domain.name)
        if problem is not None:
            unusable[i] = f"{problem[0]}: {problem[1]}"
    if task_ids and unusable:
        first = next(iter(unusable))
        raise RunError(f"--tasks: task {first} of {domain.name} cannot be judged ({unusable[first]}); leave it out")
    ids = [i for i in ids if i not in unusable]
    if limit is not None:
        ids = ids[:limit]
    if not ids:
        raise RunError(f"no tasks selected from the {split} split of {domain.name}")
    return [tasks[i] for i in ids], unusable
