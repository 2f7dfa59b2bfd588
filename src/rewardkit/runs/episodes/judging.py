"""Judged verification of synthesised trajectories: a model's verdict after the rules (``synth agent --judge``).

The rules (:func:`rewardkit.runs.episodes.synthesis.select`) pass an episode that scored 1.0 and makes a clean row; the
judge then reads the task's criteria (the user's scenario, the gold actions, the outputs the agent had to say, the
natural language assertions) and the transcript, and answers ``{"verdict": "accept" | "reject", "reason": ..., "fault":
"agent" | "user" | "tool" | null}`` (:mod:`rewardkit.loop.judge`). Every trajectory that passed the rules is judged once
per distinct conversation, ``workers`` at a time; what is decided from the verdicts stays in the rules' order. A judge
that never answers validly (down, or refusing the schema after its attempts) gives an error string, not a verdict:
``judge_error``, infrastructure, judged again by the next run (``--resume``; ``--judge-cache`` replays the verdicts
already given)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.data_builders.trajectories import trajectory_key
from rewardkit.envs.tasks import expected_outputs, gold_actions, instructions, scripted_actions
from rewardkit.loop.judge import PROMPT_VERSION, Judge, Verdict
from rewardkit.loop.roles import RoleError
from rewardkit.runs.episodes.episode_log import RunError
from rewardkit.runs.viewer.page import episode_id

JUDGE_REJECTED = "judge_rejected"
JUDGE_ERROR = "judge_error"
VERSION = PROMPT_VERSION * 100 + 1  # the judge module's answer format, then this prompt's wording
INSTRUCTIONS = """\
You verify a customer-service trajectory before it becomes training data. An agent, following its domain's
policy, served a simulated customer with tools over a database; the rules already found that the final database
is the gold one. Judge whether the transcript is one to teach: the agent did what the customer's scenario asks and
nothing else, took the gold actions for the right reasons (authenticated first, asked for and got explicit
confirmation before every write, never invented facts or ids the tools did not give), told the customer every
expected output, and satisfies every assertion. Reject a trajectory that reached the right state by luck, a guess
or a policy violation; say whose fault it is: "agent", "user" (the simulated customer left its scenario or
misled the agent), or "tool" (a tool answered wrongly)."""


@dataclass(frozen=True)
class JudgeOptions:
    """``--judge URL``, ``--judge-model``, ``--judge-cache``, ``--judge-retries``."""

    url: str
    model: str | None = None  # None: the one model the endpoint serves
    cache: Path | None = None  # SQLite replies: a rerun replays the verdicts
    retries: int = 3  # extra attempts per judge call on transport failures


def make_judge(options: JudgeOptions, workers: int) -> tuple[Judge, dict[str, Any]]:
    """The judge and its description for the report; a bad option is a :class:`RunError` naming its flag."""
    from rewardkit.loop.endpoint import EndpointSettings, check_model, only_model
    from rewardkit.loop.replies import ReplyStore
    from rewardkit.loop.roles import JsonRole

    url = options.url
    if not url.startswith(("http://", "https://")):
        raise RunError(f"--judge {url!r}: must be an http(s):// URL of an OpenAI-compatible endpoint")
    retries = options.retries
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise RunError(f"--judge-retries must be a whole number >= 0, got {retries!r}")
    try:
        model = options.model or only_model(url, "pass --judge-model")
        if options.model is not None:
            check_model(url, model, "fix --judge-model")
    except ValueError as exc:
        raise RunError(f"--judge {url}: {exc}") from exc
    cache = ReplyStore(options.cache, label="--judge-cache") if options.cache is not None else None
    settings = EndpointSettings(retries=retries, concurrency=workers)
    role = JsonRole("judge", url, model, settings=settings, cache=cache, version=VERSION)
    described = {
        "base_url": url,
        "model": model,
        "fingerprint": role.fingerprint(),
        "cache": str(options.cache) if options.cache is not None else None,
    }
    return Judge(role), described


# The heading of a task's declined and refused writes (only tasks that have some show it).
UNMADE = (
    "## Writes that must not run (declined: the agent proposes it and the customer declines the approval request; "
    "refused: the agent does not make it, and says why)"
)


def criteria(task: Mapping[str, Any]) -> str:
    """What the trajectory is judged against: the scenario, the gold actions, the writes that must not run (when
    the task has declined or refused entries), the expected outputs, the assertions."""
    scenario = instructions(task)
    actions = [{"name": a.get("name"), "arguments": a.get("arguments")} for a in gold_actions(task)]
    unmade = [{k: a[k] for k in ("name", "arguments", "outcome", "rule") if k in a} for a in scripted_actions(task)]
    unmade = [a for a in unmade if "outcome" in a]
    held = [UNMADE, json.dumps(unmade, indent=1, ensure_ascii=False)] if unmade else []
    assertions = [str(x) for x in task["evaluation_criteria"].get("nl_assertions") or []]
    parts = [
        "## The customer's scenario",
        scenario if isinstance(scenario, str) else json.dumps(scenario, indent=1, ensure_ascii=False),
        "## The gold actions (tool calls that reach the gold database)",
        json.dumps(actions, indent=1, ensure_ascii=False),
        *held,
        "## Outputs the agent must tell the customer",
        "\n".join(f"- {x}" for x in expected_outputs(task)) or "(none)",
        "## Assertions the conversation must satisfy",
        "\n".join(f"- {x}" for x in assertions) or "(none)",
    ]
    return "\n".join(parts)


def transcript(row: Mapping[str, Any]) -> str:
    """The SFT row's conversation as text, the system prompt (the policy) left out."""
    return "\n".join(f"[{m['role']}] {m['content']}" for m in row["messages"] if m["role"] != "system")


def subject(task: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    return f"# Task {task['id']}\n{criteria(task)}\n\n# The transcript\n{transcript(row)}"


def judge_trajectories(
    judge: Judge,
    candidates: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    tasks: Sequence[Mapping[str, Any]],
    workers: int,
) -> dict[str, Verdict | str]:
    """Episode id -> the judge's verdict, or why it gave none, for every ``(record, row)`` that passed the rules; one
    call per distinct conversation of a task (a repeated one shares its verdict)."""
    by_id = {str(t["id"]): t for t in tasks}
    groups: dict[tuple[str, str], list[str]] = {}
    rows: dict[tuple[str, str], Mapping[str, Any]] = {}
    for record, row in candidates:
        key = (str(record["task_id"]), trajectory_key(row))
        groups.setdefault(key, []).append(episode_id(record))
        rows.setdefault(key, row)

    def one(key: tuple[str, str]) -> Verdict | str:
        try:
            return judge.judge(INSTRUCTIONS, subject(by_id[key[0]], rows[key]))
        except RoleError as exc:
            return str(exc)

    keys = list(groups)
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(keys) or 1)), thread_name_prefix="judge")
    try:
        found = list(pool.map(one, keys))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the calls in flight
        raise
    pool.shutdown()
    return {eid: verdict for key, verdict in zip(keys, found, strict=True) for eid in groups[key]}


def as_report(found: Verdict | str) -> dict[str, Any]:
    """A verdict as the report keeps it; a judge error as ``{"verdict": "error", "reason": why, "fault": None}``."""
    if isinstance(found, str):
        return {"verdict": "error", "reason": found, "fault": None}
    return found.as_dict()


def judge_errors(report: Mapping[str, Any]) -> int:
    """Trajectories the judge gave no verdict on: the next run (``--resume``) judges them again."""
    return int(report["rejected"].get(JUDGE_ERROR, 0))
