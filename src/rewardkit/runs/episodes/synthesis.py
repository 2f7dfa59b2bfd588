"""Trajectory synthesis: run agent <-> simulated user <-> database episodes, keep the verified ones as SFT rows.

An episode is kept when ``TaskCompletion`` scores it 1.0, the rule GRPO is trained with, and
written as an ms-swift agent-format row (:mod:`rewardkit.data_builders.trajectories`). Every
episode that is not kept is counted under one reason, so ``read == kept + sum(rejected)``:

- ``user_flagged``: the user review flagged the simulated user's part (a premature stop, a fact it was never given,
  a role break, an approval against its scenario, the wrong language: :mod:`rewardkit.loop.user_review`), whatever
  the episode scored;
- ``task_failed``: the episode ran to an ending and did not complete the task;
- ``user_sim_error`` / ``agent_error`` / ``env_error``: the simulator, the agent endpoint or the tools'
  server failed (infrastructure, :data:`~rewardkit.envs.termination.EXCLUDED`, never a failed task;
  ``--resume`` runs these again);
- ``duplicate``: the same conversation as an episode already kept (deterministic agents);
- ``malformed_tool_call`` / ``empty_assistant_turn``: complete, but not something to teach;
- ``no_agent_turn``: the conversation holds no assistant turn at all (the simulated user stopped at once),
  so there is nothing to train on;
- with a judge (``--judge``, :mod:`rewardkit.runs.episodes.judging`): ``judge_rejected``, a trajectory that passed
  every rule above but the judge rejected, and ``judge_error``, one the judge gave no valid verdict on (infrastructure:
  ``--resume`` judges it again); every verdict is in the report (``judged``);
- with a verdicts file (``--verdicts``, saved by the episode viewer): ``reviewer_rejected``, a trajectory that
  passed every rule above (and the judge) but a person rejected, and ``unreviewed``, one that nobody judged (a
  verdict given on another episode of its id is not applied: ``verdicts_on_another_episode`` names them).

Each rejection is also counted under whose fault it is (``faults``: agent, user, tool or none;
:mod:`rewardkit.runs.episodes.faults`), overall and per task, summing to the rejections.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.data_builders.trajectories import sft_row, trajectory_key
from rewardkit.envs.termination import EXCLUDED
from rewardkit.files.jsonl import dumps
from rewardkit.files.outputs import OutputSet
from rewardkit.loop.judge import Judge, Verdict
from rewardkit.runs.episodes.episode_log import EpisodeLog
from rewardkit.runs.episodes.faults import fault_of, tally
from rewardkit.runs.episodes.judging import (
    JUDGE_ERROR,
    JUDGE_REJECTED,
    JudgeOptions,
    as_report,
    judge_trajectories,
    make_judge,
)
from rewardkit.runs.episodes.spec import RunSpec, build_plan
from rewardkit.runs.episodes.trials import HINT, TrialPlan, run_trials
from rewardkit.runs.stats.metrics import task_order
from rewardkit.runs.viewer.page import episode_id, read_verdicts, verdicts_for

TASK_FAILED = "task_failed"
USER_FLAGGED = "user_flagged"
DUPLICATE = "duplicate"
REVIEWER_REJECTED = "reviewer_rejected"
UNREVIEWED = "unreviewed"


def select(
    records: list[dict[str, Any]],
    tools_json: str | None,
    verdicts: Mapping[str, str] | None = None,
    judgements: Mapping[str, Verdict | str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The SFT rows of the kept episodes (task, then trial order) and the report; with ``judgements`` (episode id ->
    the judge's verdict, or why it gave none, for every episode that passed the rules) the judge's accept is needed,
    and with ``verdicts`` (episode id -> accept or reject) a person's accept too."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    judged: dict[str, dict[str, Any]] = {}
    per_task: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"attempted": 0, "kept": 0, "rejected": Counter(), "terminations": Counter(), "faults": Counter()}
    )
    for record in sorted(records, key=lambda r: (task_order(r["task_id"]), r["trial"])):
        stats = per_task[record["task_id"]]
        stats["attempted"] += 1
        stats["terminations"][record["termination"]] += 1
        found = judgements.get(episode_id(record)) if judgements is not None else None
        reason = _reason(record, tools_json, seen, rows, verdicts, judgements, judged)
        if reason is None:
            stats["kept"] += 1
        else:
            stats["rejected"][reason] += 1
            named = found.fault if isinstance(found, Verdict) else None
            stats["faults"][fault_of(reason, str(record["termination"]), named)] += 1
    report = _report(len(records), len(rows), per_task)
    if judgements is not None:
        report["judged"] = judged
    return rows, report


def _report(read: int, kept: int, per_task: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The counts, overall and per task; they must reconcile (``read == kept + rejected``, faults likewise)."""
    rejected: Counter[str] = sum((s["rejected"] for s in per_task.values()), Counter())
    terminations: Counter[str] = sum((s["terminations"] for s in per_task.values()), Counter())
    faults: Counter[str] = sum((s["faults"] for s in per_task.values()), Counter())
    report = {
        "read": read,
        "kept": kept,
        "rejected": dict(sorted(rejected.items())),
        "faults": tally(faults),
        "terminations": dict(sorted(terminations.items())),
        "tasks_with_a_kept_episode": sum(s["kept"] > 0 for s in per_task.values()),
        "per_task": {
            task_id: {
                **s,
                "rejected": dict(sorted(s["rejected"].items())),
                "terminations": dict(sorted(s["terminations"].items())),
                "faults": tally(s["faults"]),
            }
            for task_id, s in per_task.items()
        },
    }
    if read != kept + sum(rejected.values()):
        raise AssertionError(f"synthesis counts do not reconcile: {read} != kept + rejected")
    if sum(faults.values()) != sum(rejected.values()):
        raise AssertionError("synthesis fault counts do not reconcile with the rejections")
    return report


def _rules(record: Mapping[str, Any], tools_json: str | None) -> dict[str, Any] | str:
    """The episode's row, or the rule it breaks: an infrastructure ending, a failed task, a row not to teach."""
    if record["status"] != "ok":
        return str(record["termination"])  # an EXCLUDED ending: infrastructure, counted as such
    if record.get("user_flags"):  # the simulated user erred (its review): not a conversation to teach from
        return USER_FLAGGED
    if record["reward"] != 1.0:
        return TASK_FAILED
    return sft_row(record["messages"], tools_json)


def rule_passed(records: list[dict[str, Any]], tools_json: str | None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(record, row)`` of every episode the rules pass (a duplicate included): what a judge is asked about."""
    found = [(record, _rules(record, tools_json)) for record in records]
    return [(record, row) for record, row in found if not isinstance(row, str)]


def _reason(
    record: Mapping[str, Any],
    tools_json: str | None,
    seen: set[str],
    rows: list,
    verdicts: Mapping[str, str] | None,
    judgements: Mapping[str, Verdict | str] | None,
    judged: dict[str, dict[str, Any]],
) -> str | None:
    """Why the episode is not kept, or None after appending its row (a verdict consulted goes into ``judged``)."""
    row = _rules(record, tools_json)
    if isinstance(row, str):
        return row
    key = trajectory_key(row)
    if key in seen:
        return DUPLICATE
    eid = episode_id(record)
    if judgements is not None:
        found = judgements.get(eid, "the judge was not asked about this trajectory")
        judged[eid] = as_report(found)
        if not isinstance(found, Verdict):
            return JUDGE_ERROR
        if not found.accept:
            return JUDGE_REJECTED
    if verdicts is not None and verdicts.get(eid) != "accept":
        return REVIEWER_REJECTED if verdicts.get(eid) == "reject" else UNREVIEWED
    seen.add(key)
    rows.append(row)
    return None


def synthesize(
    plan: TrialPlan,
    log: EpisodeLog,
    out: Path,
    report_path: Path | None,
    tools_json: str | None,
    meta: Mapping[str, Any],
    progress: bool = True,
    verdicts: Path | None = None,
    judge: Judge | None = None,
) -> dict[str, Any]:
    """Run the plan's missing episodes, judge (with ``judge``) what the rules pass, then write the kept rows and the
    report together (atomically)."""
    reviewed = read_verdicts(verdicts, meta["run"]) if verdicts is not None else None  # before any episode runs
    records = run_trials(plan, log, progress=progress, label="synthesis")
    judgements = None
    if judge is not None:
        try:
            judgements = judge_trajectories(judge, rule_passed(records, tools_json), plan.tasks, plan.workers)
        except BaseException as exc:  # interrupted while judging: every episode is in the log already
            with contextlib.suppress(AttributeError):
                setattr(exc, HINT, log.resume_hint())
            raise
    # A verdict given on another episode of the same id (another log of the run) is not applied, and named.
    given, elsewhere = verdicts_for(records, reviewed) if reviewed is not None else (None, [])
    rows, report = select(records, tools_json, given, judgements)
    ledger = plan.ledger() + ([judge.ledger.summary(plan.price_per_mtok)] if judge is not None else [])
    report = {**meta, **report, "ledger": ledger}
    if reviewed is not None:
        report["verdicts_on_another_episode"] = elsewhere
    with OutputSet() as outputs:
        with outputs.open(out, "--out") as f:
            for row in rows:
                f.write(dumps(row, allow_nan=False) + "\n")
        if report_path is not None:
            text = dumps(report, indent=2, allow_nan=False) + "\n"
            outputs.write_text(report_path, text, "--report")
    return report


def synthesize_run(
    spec: RunSpec,
    out: Path,
    report_path: Path | None,
    episodes: Path,
    resume: bool = False,
    progress: bool = True,
    verdicts: Path | None = None,
    judge: JudgeOptions | None = None,
) -> dict[str, Any]:
    """The whole of ``synth agent`` after its options are checked: plan the spec (and the judge: neither part of the
    run's fingerprint nor a reason to rerun an episode), continue (``resume``) or start the episode log at
    ``episodes``, run, write the kept rows to ``out`` and the report."""
    plan, meta = build_plan(spec)
    judged_by = None
    if judge is not None:
        judged_by, described = make_judge(judge, spec.workers)
        meta = {**meta, "judge": described}
    tools = json.dumps(plan.domain.tool_specs(), ensure_ascii=False) if spec.tools else None
    with EpisodeLog(episodes, meta["run"], resume, choose="another --episodes file (or --out)") as log:
        return synthesize(
            plan, log, out, report_path, tools, meta, progress=progress, verdicts=verdicts, judge=judged_by
        )


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
