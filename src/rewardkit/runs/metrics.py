"""Metrics of an agent evaluation: pass^k, per-task tables, run summaries and paired run comparisons.

Pure functions over episode records, one per (task, trial), as ``rewardkit eval tau2`` writes them to
``episodes.jsonl`` (one JSON object per line)::

    {"task_id": str, "trial": int,
     "status": "ok" | "infra_error",  # infra_error: the simulator or the agent endpoint failed
     "reward": float | None,          # task_completion in {0.0, 1.0}; None when infra_error
     "tcr": float | None,             # task_completion_rate in [0, 1]; None when infra_error
     "termination": str,              # user_stop, agent_stop, max_turns, user_sim_error, agent_error, ...
     "turns": int, "tool_calls": int, "tool_errors": int,
     "tools": {tool_name: count},     # calls per tool in this episode
     "error": str | None, ...}        # any other key (messages, ...) is ignored

An ``infra_error`` episode says nothing about the agent: it is left out of every metric and only counted
(and its termination reason is counted). A (task_id, trial) that occurs more than once keeps its *last*
record, since a resumed run appends the retried episode. Task ids are compared as strings.
"""

from __future__ import annotations

import codecs
import csv
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.files.jsonl import read_jsonl
from rewardkit.files.outputs import OutputSet

STATUSES = ("ok", "infra_error")
SUCCESS = 1.0 - 1e-6  # a reward this high is a success (tau-bench's tolerance around 1.0)
TABLE_COLUMNS = ("task_id", "trials", "successes", "infra_errors", "pass1", "mean_tcr", "mean_turns",
                 "mean_tool_calls")  # fmt: skip


class EvalError(ValueError):
    """Episode records or a task table that cannot be used; the message names the file and line when known."""


def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k of one task: the chance that k trials, drawn without replacement from n trials
    with c successes, all succeed, C(c, k) / C(n, k). Not estimable for k > n: ValueError (callers skip the task).

    >>> pass_hat_k(4, 2, 1), pass_hat_k(4, 2, 2), pass_hat_k(4, 2, 3)
    (0.5, 0.16666666666666666, 0.0)
    """
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"pass^k needs 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass^{k} is not estimable from {n} trials")
    return math.comb(c, k) / math.comb(n, k)


@dataclass(frozen=True)
class TaskStats:
    """One task's valid trials (infra errors excluded, counted apart) and their means; None without a valid trial."""

    task_id: str
    trials: int
    successes: int
    infra_errors: int = 0
    mean_tcr: float | None = None
    mean_turns: float | None = None
    mean_tool_calls: float | None = None

    @property
    def pass1(self) -> float | None:
        return self.successes / self.trials if self.trials else None

    def row(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in TABLE_COLUMNS}


def task_order(task_id: str) -> tuple[int, int, str]:
    """Sort key: numeric ids in numeric order ("2" before "10"), then the others alphabetically."""
    return (0, int(task_id), "") if task_id.isascii() and task_id.isdigit() else (1, 0, task_id)


def _mean(values: Iterable[Any]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _episode_problem(row: dict[str, Any]) -> str | None:
    """Why a dict is not a usable episode record, or None."""
    if "task_id" not in row or not isinstance(row.get("trial"), int) or isinstance(row.get("trial"), bool):
        return "an episode record needs 'task_id' and an integer 'trial'"
    if row.get("status") not in STATUSES:
        return f"'status' must be one of {', '.join(STATUSES)}, got {row.get('status')!r}"
    if row["status"] == "ok" and not _number(row.get("reward")):
        return f"an ok episode needs a numeric 'reward', got {row.get('reward')!r}"
    return None


def episodes(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records checked and deduplicated: the last record of each (task_id, trial) wins."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for row in records:
        problem = _episode_problem(row)
        if problem:
            raise EvalError(f"task {row.get('task_id')!r} trial {row.get('trial')!r}: {problem}")
        key = (str(row["task_id"]), row["trial"])
        latest.pop(key, None)  # re-inserted below: the replacement keeps the order in which it was written
        latest[key] = {**row, "task_id": key[0]}
    return list(latest.values())


def task_stats(records: Iterable[dict[str, Any]]) -> list[TaskStats]:
    """One ``TaskStats`` per task id, in ``task_order``; duplicate (task_id, trial) records: the last wins."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in episodes(records):
        groups.setdefault(row["task_id"], []).append(row)
    out = []
    for task_id in sorted(groups, key=task_order):
        valid = [r for r in groups[task_id] if r["status"] == "ok"]
        out.append(TaskStats(
            task_id=task_id, trials=len(valid), successes=sum(r["reward"] >= SUCCESS for r in valid),
            infra_errors=len(groups[task_id]) - len(valid), mean_tcr=_mean(r.get("tcr") for r in valid),
            mean_turns=_mean(r.get("turns") for r in valid), mean_tool_calls=_mean(r.get("tool_calls") for r in valid),
        ))  # fmt: skip
    return out


def _pass_k(stats: Sequence[TaskStats], trials: int | None) -> list[dict[str, Any]]:
    top = trials if trials is not None else max((s.trials for s in stats), default=0)
    out = []
    for k in range(1, top + 1):
        values = [pass_hat_k(s.trials, s.successes, k) for s in stats if s.trials >= k]
        out.append({"k": k, "value": _mean(values), "tasks": len(values), "skipped": len(stats) - len(values)})
    return out


def summarize_episodes(records: Iterable[dict[str, Any]], trials: int | None = None) -> dict[str, Any]:
    """The run as one JSON-able dict: ``episodes`` and ``tasks`` counts; ``pass_hat_k``, one entry per k in
    1..``trials`` (default: the most valid trials of any task), averaged over the tasks with at least k valid
    trials (``tasks``; the others are ``skipped``, value None when none is left); episode-weighted ``mean``s
    over valid episodes; ``termination`` counts over all episodes, infra included, most frequent first;
    ``tools``: calls, share of all calls, episodes using the tool and their share, most called first."""
    rows = list(records)
    kept = episodes(rows)
    stats = task_stats(kept)
    valid = [r for r in kept if r["status"] == "ok"]
    tools: Counter[str] = Counter()
    users: Counter[str] = Counter()  # episodes that called the tool at least once
    for row in valid:
        for name, count in (row.get("tools") or {}).items():
            tools[name] += int(count)
            users[name] += int(count) > 0
    total_calls = sum(tools.values())
    return {
        "episodes": {
            "total": len(kept),
            "valid": len(valid),
            "infra_error": len(kept) - len(valid),
            "duplicates_replaced": len(rows) - len(kept),
        },
        "tasks": {"total": len(stats), "no_valid_trial": sum(s.trials == 0 for s in stats)},
        "pass_hat_k": _pass_k(stats, trials),
        "mean": {
            "reward": _mean(r["reward"] for r in valid),  # pass^1 weighted per episode, not per task
            "tcr": _mean(r.get("tcr") for r in valid),
            "turns": _mean(r.get("turns") for r in valid),
            "tool_calls": _mean(r.get("tool_calls") for r in valid),
            "tool_errors": _mean(r.get("tool_errors") for r in valid),
        },
        "termination": dict(Counter(str(r.get("termination") or "unknown") for r in kept).most_common()),
        "tools": {
            name: {
                "calls": calls,
                "share_of_calls": calls / total_calls if total_calls else 0.0,  # tools listed with 0 calls
                "episodes": users[name],
                "share_of_episodes": users[name] / len(valid),
            }
            for name, calls in sorted(tools.items(), key=lambda item: (-item[1], item[0]))
        },
    }


def _stats_by_id(run: Sequence[dict[str, Any]] | Sequence[TaskStats]) -> dict[str, TaskStats]:
    items = list(run)
    stats = items if items and isinstance(items[0], TaskStats) else task_stats(items)
    return {s.task_id: s for s in stats}


def compare(
    a: Sequence[dict[str, Any]] | Sequence[TaskStats],
    b: Sequence[dict[str, Any]] | Sequence[TaskStats],
    n_boot: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Run B against run A, paired by task: per task p = pass^1 (successes / valid trials); the diff is the
    mean of p_B - p_A over the tasks with a valid trial in both, with a paired-bootstrap percentile interval."""
    if n_boot < 1 or not 0 < confidence < 1:
        raise EvalError(f"need n_boot >= 1 and 0 < confidence < 1 (got {n_boot}, {confidence})")
    sa, sb = _stats_by_id(a), _stats_by_id(b)
    common = sorted(sa.keys() & sb.keys(), key=task_order)
    paired = [t for t in common if sa[t].trials and sb[t].trials]
    if not paired:
        raise EvalError(f"no task has a valid trial in both runs ({len(sa)} and {len(sb)} tasks, {len(common)} shared)")
    pa = np.array([sa[t].pass1 for t in paired], dtype=float)
    pb = np.array([sb[t].pass1 for t in paired], dtype=float)
    diffs = pb - pa
    rng = np.random.default_rng(seed)
    boot = diffs[rng.integers(0, len(paired), size=(n_boot, len(paired)))].mean(axis=1)  # resampled tasks
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    per_task = [{"task_id": t, "a": float(x), "b": float(y)} for t, x, y in zip(paired, pa, pb, strict=True)]
    return {
        "paired_tasks": len(paired),
        "a": {"pass1": float(pa.mean()), "tasks": len(sa)},
        "b": {"pass1": float(pb.mean()), "tasks": len(sb)},
        "diff": float(diffs.mean()),
        "ci": [float(low), float(high)],
        "confidence": confidence,
        "n_boot": n_boot,
        "seed": seed,
        "share_boot_positive": float(np.mean(boot > 0)),  # one-sided indication that B beats A, not a p-value
        "improved": [row for row in per_task if row["b"] > row["a"]],
        "regressed": [row for row in per_task if row["b"] < row["a"]],
        "unchanged": int(np.sum(diffs == 0)),
        "only_in_a": sorted(sa.keys() - sb.keys(), key=task_order),
        "only_in_b": sorted(sb.keys() - sa.keys(), key=task_order),
        "no_valid_trial": [t for t in common if not (sa[t].trials and sb[t].trials)],
        "per_task": per_task,
    }


def _line_number(path: Path, index: int) -> int:
    """The file line of the index-th non-blank line, counted as ``read_jsonl`` counts them (errors only)."""
    text = path.read_bytes().removeprefix(codecs.BOM_UTF8).decode("utf-8")
    return [n for n, line in enumerate(text.split("\n"), 1) if line.strip()][index]


def _table_row(row: dict[str, Any]) -> TaskStats:
    trials, successes = row.get("trials"), row.get("successes")
    if "task_id" not in row:
        raise ValueError("a task row needs 'task_id'")
    if not (isinstance(trials, int) and isinstance(successes, int) and 0 <= successes <= trials):
        raise ValueError(f"a task row needs integers 0 <= 'successes' <= 'trials', got {successes!r}, {trials!r}")
    known = {f.name for f in fields(TaskStats)}
    return TaskStats(**{**{k: v for k, v in row.items() if k in known}, "task_id": str(row["task_id"])})


def read_run(path: str | Path) -> list[dict[str, Any]] | list[TaskStats]:
    """Episode records, or ``TaskStats`` when the file is a per-task table (rows with task_id, trials, successes).

    The first row decides which; any row that does not fit raises ``EvalError`` naming ``file:line``.
    """
    path = Path(path)
    rows = read_jsonl(path)  # JsonlError with file:line for a line that is not a JSON object
    table = bool(rows) and {"task_id", "trials", "successes"} <= rows[0].keys()
    out: list[Any] = []
    for i, row in enumerate(rows):
        try:
            if table:
                out.append(_table_row(row))
            elif problem := _episode_problem(row):
                raise ValueError(problem)
            else:
                out.append(row)
        except (ValueError, TypeError) as exc:
            kind = "task table" if table else "episode file"
            raise EvalError(f"{path}:{_line_number(path, i)}: {exc} (in a {kind})") from None
    return out


def write_task_table(stats: Sequence[TaskStats], jsonl_path: str | Path, csv_path: str | Path | None = None) -> None:
    """The per-task table as JSONL (which ``read_run`` reads back) and CSV; both land together or not at all."""
    with OutputSet() as outputs:
        with outputs.open(jsonl_path) as f:
            f.writelines(json.dumps(s.row(), ensure_ascii=False) + "\n" for s in stats)
        if csv_path is not None:
            with outputs.open(csv_path) as f:
                writer = csv.DictWriter(f, fieldnames=TABLE_COLUMNS, lineterminator="\n")
                writer.writeheader()
                writer.writerows(s.row() for s in stats)
