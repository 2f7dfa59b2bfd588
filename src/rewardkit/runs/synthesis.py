"""Trajectory synthesis: run agent <-> simulated user <-> database episodes, keep the verified ones as SFT rows.

An episode is kept when ``TaskCompletion`` scores it 1.0, the rule GRPO is trained with, and
written as an ms-swift agent-format row (:mod:`rewardkit.data_builders.trajectories`). Every
episode that is not kept is counted under one reason, so ``read == kept + sum(rejected)``:

- ``task_failed``: the episode ran to an ending and did not complete the task;
- ``user_sim_error`` / ``agent_error`` / ``env_error``: the simulator, the agent endpoint or the tools'
  server failed (infrastructure, :data:`~rewardkit.envs.termination.EXCLUDED`, never a failed task;
  ``--resume`` runs these again);
- ``duplicate``: the same conversation as an episode already kept (deterministic agents);
- ``malformed_tool_call`` / ``empty_assistant_turn``: complete, but not something to teach;
- ``no_agent_turn``: the conversation holds no assistant turn at all (the simulated user stopped at once),
  so there is nothing to train on;
- with a verdicts file (``--verdicts``, saved by the episode viewer): ``reviewer_rejected``, a trajectory that
  passed every rule above but a person rejected, and ``unreviewed``, one that nobody judged.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.data_builders.trajectories import sft_row, trajectory_key
from rewardkit.envs.termination import EXCLUDED
from rewardkit.files.outputs import OutputSet
from rewardkit.runs.episode_log import EpisodeLog
from rewardkit.runs.metrics import task_order
from rewardkit.runs.spec import RunSpec, build_plan
from rewardkit.runs.trials import TrialPlan, run_trials
from rewardkit.runs.viewer import episode_id, read_verdicts

TASK_FAILED = "task_failed"
DUPLICATE = "duplicate"
REVIEWER_REJECTED = "reviewer_rejected"
UNREVIEWED = "unreviewed"


def select(
    records: list[dict[str, Any]], tools_json: str | None, verdicts: Mapping[str, str] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The SFT rows of the kept episodes (task, then trial order) and the report; with ``verdicts`` (episode id ->
    accept or reject), a person's accept is needed too."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    per_task: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"attempted": 0, "kept": 0, "rejected": Counter(), "terminations": Counter()}
    )
    for record in sorted(records, key=lambda r: (task_order(r["task_id"]), r["trial"])):
        stats = per_task[record["task_id"]]
        stats["attempted"] += 1
        stats["terminations"][record["termination"]] += 1
        reason = _reason(record, tools_json, seen, rows, verdicts)
        if reason is None:
            stats["kept"] += 1
        else:
            stats["rejected"][reason] += 1
    rejected: Counter[str] = sum((s["rejected"] for s in per_task.values()), Counter())
    terminations: Counter[str] = sum((s["terminations"] for s in per_task.values()), Counter())
    report = {
        "read": len(records),
        "kept": len(rows),
        "rejected": dict(sorted(rejected.items())),
        "terminations": dict(sorted(terminations.items())),
        "tasks_with_a_kept_episode": sum(s["kept"] > 0 for s in per_task.values()),
        "per_task": {
            task_id: {
                **s,
                "rejected": dict(sorted(s["rejected"].items())),
                "terminations": dict(sorted(s["terminations"].items())),
            }
            for task_id, s in per_task.items()
        },
    }
    if report["read"] != report["kept"] + sum(rejected.values()):
        raise AssertionError(f"synthesis counts do not reconcile: {report['read']} != kept + rejected")
    return rows, report


def _reason(
    record: Mapping[str, Any], tools_json: str | None, seen: set[str], rows: list,
    verdicts: Mapping[str, str] | None,
) -> str | None:  # fmt: skip
    """Why the episode is not kept, or None after appending its row."""
    if record["status"] != "ok":
        return str(record["termination"])  # an EXCLUDED ending: infrastructure, counted as such
    if record["reward"] != 1.0:
        return TASK_FAILED
    row = sft_row(record["messages"], tools_json)
    if isinstance(row, str):
        return row
    key = trajectory_key(row)
    if key in seen:
        return DUPLICATE
    if verdicts is not None and verdicts.get(episode_id(record)) != "accept":
        return REVIEWER_REJECTED if verdicts.get(episode_id(record)) == "reject" else UNREVIEWED
    seen.add(key)
    rows.append(row)
    return None


def synthesize(
    plan: TrialPlan, log: EpisodeLog, out: Path, report_path: Path | None, tools_json: str | None,
    meta: Mapping[str, Any], progress: bool = True, verdicts: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run the plan's missing episodes, then write the kept rows and the report together (atomically)."""
    judged = read_verdicts(verdicts, meta["run"]) if verdicts is not None else None  # before any episode runs
    records = run_trials(plan, log, progress=progress, label="synthesis")
    rows, report = select(records, tools_json, judged)
    report = {**meta, **report, "ledger": plan.ledger()}
    with OutputSet() as outputs:
        with outputs.open(out, "--out") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
        if report_path is not None:
            text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
            outputs.write_text(report_path, text, "--report")
    return report


def synthesize_run(
    spec: RunSpec, out: Path, report_path: Path | None, episodes: Path, resume: bool = False, progress: bool = True,
    verdicts: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The whole of ``synth agent`` after its options are checked: plan the spec, continue (``resume``) or
    start the episode log at ``episodes``, run, write the kept rows to ``out`` and the report."""
    plan, meta = build_plan(spec)
    tools = json.dumps(plan.domain.tool_specs(), ensure_ascii=False) if spec.tools else None
    with EpisodeLog(episodes, meta["run"], resume, choose="another --episodes file (or --out)") as log:
        return synthesize(plan, log, out, report_path, tools, meta, progress=progress, verdicts=verdicts)


def headline(report: Mapping[str, Any]) -> str:
    """One line: episodes read, kept (and over how many tasks), rejected per reason."""
    rejected = ", ".join(f"{k} {v}" for k, v in report["rejected"].items()) or "none"
    return (
        f"read {report['read']}  kept {report['kept']} ({report['tasks_with_a_kept_episode']} of "
        f"{len(report['per_task'])} tasks)  rejected: {rejected}"
    )


def infrastructure_errors(report: Mapping[str, Any]) -> int:
    """Episodes rejected for an infrastructure ending (every one of EXCLUDED): the ones a resumed run retries."""
    return sum(report["rejected"].get(t.value, 0) for t in EXCLUDED)
