"""Metrics of an agent evaluation: pass^k, per-task statistics, run summaries and paired run comparisons.

Pure functions over episode records, one per (task, trial), as ``rewardkit eval agent`` writes them to
``episodes.jsonl`` (one JSON object per line)::

    {"task_id": str, "trial": int,
     "status": "ok" | "infra_error",  # infra_error: the simulator or the agent endpoint failed
     "reward": float | None,          # task_completion in {0.0, 1.0}; None when infra_error
     "tcr": float | None,             # task_completion_rate in [0, 1]; None when infra_error
     "termination": str,              # user_stop, agent_stop, max_turns, user_sim_error, agent_error, ...
     "turns": int, "tool_calls": int, "tool_errors": int,
     "tools": {tool_name: count},     # calls per tool in this episode
     "call_codes": {code: count},     # the agent's calls per result code (OK, HARD_GATE, ...)
     "gates": {"requested", "approved", "declined", "hard_gate": int},  # approval traffic (optional)
     "user_flags": [{"kind": str, "turn": int, "evidence": str}],  # the user review's flags (optional)
     "error": str | None, ...}        # any other key (messages, ...) is ignored

An ``infra_error`` episode says nothing about the agent: it is left out of every metric and only counted
(and its termination reason is counted). A (task_id, trial) that occurs more than once keeps its *last*
record, since a resumed run appends the retried episode. Task ids are compared as strings.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewardkit.runs.episodes.records import record_problem
from rewardkit.runs.stats.paired import PairingError, bootstrap

SUCCESS = 1.0 - 1e-6  # a reward this high is a success (tau-bench's tolerance around 1.0)
TABLE_COLUMNS = ("task_id", "trials", "successes", "infra_errors", "pass1", "mean_tcr", "mean_turns", "mean_tool_calls")


class EvalError(PairingError):
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
    """The mean of the non-None values; None when there is none. Records are validated (finite numbers), so
    the mean is finite; were it not, it would be None (null in JSON), never NaN."""
    kept = [float(v) for v in values if v is not None]
    mean = float(np.mean(kept)) if kept else None
    return mean if mean is not None and math.isfinite(mean) else None


def episodes(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records checked and deduplicated: the last record of each (task_id, trial) wins."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for row in records:
        problem = record_problem(row, log=False)
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
        out.append(
            TaskStats(
                task_id=task_id,
                trials=len(valid),
                successes=sum(r["reward"] >= SUCCESS for r in valid),
                infra_errors=len(groups[task_id]) - len(valid),
                mean_tcr=_mean(r.get("tcr") for r in valid),
                mean_turns=_mean(r.get("turns") for r in valid),
                mean_tool_calls=_mean(r.get("tool_calls") for r in valid),
            )
        )
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
    ``tools``: calls, share of all calls, episodes using the tool and their share, most called first;
    ``operations``: the agent's calls, those that succeeded and their share; ``gates``: approval requests opened,
    approved and declined by the user (``approval_rate`` of the decided ones), hard gates hit."""
    rows = list(records)
    kept = episodes(rows)
    stats = task_stats(kept)
    valid = [r for r in kept if r["status"] == "ok"]
    codes: Counter[str] = Counter()
    gates: Counter[str] = Counter()
    for row in valid:
        codes.update(row.get("call_codes") or {})
        gates.update(row.get("gates") or {})
    decided = gates["approved"] + gates["declined"]
    calls = sum(codes.values())
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
        # A production console's metrics: successful calls over all calls, and the gates' traffic.
        "operations": {"calls": calls, "ok": codes["OK"], "success_rate": codes["OK"] / calls if calls else None},
        "gates": {
            "requested": gates["requested"],
            "approved": gates["approved"],
            "declined": gates["declined"],
            "approval_rate": gates["approved"] / decided if decided else None,
            "hard_gate": gates["hard_gate"],
        },
        "termination": dict(Counter(str(r.get("termination") or "unknown") for r in kept).most_common()),
        "tools": _tool_use(valid),
        "user_review": _user_review(kept, trials),
    }


def _user_review(kept: Sequence[dict[str, Any]], trials: int | None) -> dict[str, Any]:
    """The episodes the user review flagged, by kind: the valid ones (``rollout.user_review: count``) and those it
    ended as ``user_sim_mistake`` (``exclude``) alike; and pass^k without them: what the agent scores once the
    simulated user's mistakes are left out."""
    flagged = [r for r in kept if r.get("user_flags")]
    return {
        "flagged": len(flagged),
        "kinds": dict(Counter(str(f.get("kind")) for r in flagged for f in r["user_flags"]).most_common()),
        "pass_hat_k_without_flagged": _pass_k(task_stats([r for r in kept if not r.get("user_flags")]), trials),
    }


def _tool_use(valid: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tool over the valid episodes: calls, share of all calls, episodes using it and their share; most
    called first."""
    tools: Counter[str] = Counter()
    users: Counter[str] = Counter()  # episodes that called the tool at least once
    for row in valid:
        for name, count in (row.get("tools") or {}).items():
            tools[name] += int(count)
            users[name] += int(count) > 0
    total_calls = sum(tools.values())
    return {
        name: {
            "calls": calls,
            "share_of_calls": calls / total_calls if total_calls else 0.0,  # tools listed with 0 calls
            "episodes": users[name],
            "share_of_episodes": users[name] / len(valid),
        }
        for name, calls in sorted(tools.items(), key=lambda item: (-item[1], item[0]))
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
    sa, sb = _stats_by_id(a), _stats_by_id(b)
    common = sorted(sa.keys() & sb.keys(), key=task_order)
    paired = [t for t in common if sa[t].trials and sb[t].trials]
    if not paired:
        raise EvalError(f"no task has a valid trial in both runs ({len(sa)} and {len(sb)} tasks, {len(common)} shared)")
    pa = np.array([sa[t].pass1 for t in paired], dtype=float)
    pb = np.array([sb[t].pass1 for t in paired], dtype=float)
    diffs = pb - pa
    ci, positive = bootstrap(diffs, n_boot, seed, confidence)
    per_task = [{"task_id": t, "a": float(x), "b": float(y)} for t, x, y in zip(paired, pa, pb, strict=True)]
    return {
        "paired_tasks": len(paired),
        "a": {"pass1": float(pa.mean()), "tasks": len(sa)},
        "b": {"pass1": float(pb.mean()), "tasks": len(sb)},
        "diff": float(diffs.mean()),
        "ci": ci,
        "confidence": confidence,
        "n_boot": n_boot,
        "seed": seed,
        "share_boot_positive": positive,  # one-sided indication that B beats A, not a p-value
        "improved": [row for row in per_task if row["b"] > row["a"]],
        "regressed": [row for row in per_task if row["b"] < row["a"]],
        "unchanged": int(np.sum(diffs == 0)),
        "only_in_a": sorted(sa.keys() - sb.keys(), key=task_order),
        "only_in_b": sorted(sb.keys() - sa.keys(), key=task_order),
        "no_valid_trial": [t for t in common if not (sa[t].trials and sb[t].trials)],
        "per_task": per_task,
    }
