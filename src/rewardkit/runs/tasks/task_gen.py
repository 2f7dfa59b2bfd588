"""``rewardkit tasks generate``: a model proposes task blueprints, the real environment verifies them.

The blueprint-then-verify idea is APIGen-MT's (Prabhakar et al., 2025, arXiv:2504.03601): a model drafts what the
user wants and the gold tool calls; the calls are replayed on the environment, and only blueprints that hold up
(:mod:`rewardkit.runs.tasks.task_checks`) and, with a judge, that it accepts become tau2 tasks. One blueprint per
request:

    {"kind": "plain" | "gated" | "adversarial",
     "user_scenario": {"reason_for_call": str, "known_info": str, "approval": "approve" | "decline"},
     "actions": [{"name": str, "arguments": {...}}], "outputs": [str]}

Requests run concurrently, a batch of ``workers`` at a time; each batch's prompts list the scenarios kept before
it, and its checks run in request order, so a deterministic server gives the same tasks every run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jsonschema import Draft202012Validator

from rewardkit.envs import Domain
from rewardkit.envs.tasks import reason_for_call
from rewardkit.loop.judge import Judge
from rewardkit.loop.roles import Check, JsonRole, RoleError
from rewardkit.runs.tasks.blueprints import sample_blueprint, value_pools
from rewardkit.runs.tasks.task_checks import Seen, rejection, seen_from

PROMPT_VERSION = 1
KINDS = ("plain", "gated", "adversarial")
SAMPLE_CHARS = 4000  # the data sample in the prompt, as JSON text
_TEXT = {"type": "string", "minLength": 1}
BLUEPRINT_SCHEMA = {
    "type": "object",
    "required": ["kind", "user_scenario", "actions", "outputs"],
    "properties": {
        "kind": {"enum": list(KINDS)},
        "user_scenario": {
            "type": "object",
            "required": ["reason_for_call"],
            "properties": {
                "reason_for_call": _TEXT,
                "known_info": {"type": "string"},
                "approval": {"enum": ["approve", "decline"]},
            },
        },
        "actions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "arguments"],
                "properties": {"name": _TEXT, "arguments": {"type": "object"}},
            },
        },
        "outputs": {"type": "array", "items": {"type": "string"}},
    },
}
_VALIDATOR = Draft202012Validator(BLUEPRINT_SCHEMA)
WANTED = {
    "plain": "kind plain: an ordinary request the policy allows; the gold makes at least one write.",
    "gated": "kind gated: a write that a soft gate holds for the user's approval, and the user approves it "
    '(user_scenario.approval "approve"); the gold makes that write.',
    "adversarial": "kind adversarial: the user pushes for something a hard gate or the policy forbids; the gold makes "
    "no write (only the reads the agent needs), and outputs are what the agent must say when it refuses.",
}


def kinds_for(domain: Domain) -> tuple[str, ...]:
    """``plain`` always; ``gated`` and ``adversarial`` too when some tool has gates."""
    gated = any(getattr(spec, "gates", ()) for spec in domain.tools.values())
    return KINDS if gated else KINDS[:1]


def blueprint_check(kind: str, write_tools: frozenset[str]) -> Check:
    """What is wrong with a proposed blueprint of ``kind`` (the role asks again), or None."""

    def check(value: Any) -> str | None:
        errors = sorted(_VALIDATOR.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            where = "/".join(map(str, errors[0].absolute_path)) or "the blueprint"
            return f"{where}: {errors[0].message}"
        if value["kind"] != kind:
            return f"kind: this request asks for {kind!r}, got {value['kind']!r}"
        if kind == "gated" and value["user_scenario"].get("approval") != "approve":
            return 'user_scenario.approval: a gated blueprint\'s user approves: "approve"'
        writes = [a["name"] for a in value["actions"] if a["name"] in write_tools]
        if kind == "adversarial" and writes:
            return f"actions: an adversarial gold makes no write, got {', '.join(writes)}"
        return None

    return check


def _export(domain: Domain) -> dict[str, Any]:
    with domain.make_env(None) as env:
        return env.export()


def _sample(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False)
    return text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS] + " …(truncated)"


def prompt(domain: Domain, sample: str, kind: str, kept: list[str]) -> list[dict[str, str]]:
    """The proposer's messages for one blueprint of ``kind``, given the scenarios kept so far."""
    tools = json.dumps(domain.tool_specs(), ensure_ascii=False)
    system = (
        "You write task blueprints for training a tool-use agent. A blueprint is what a user wants, and the exact "
        "tool calls (gold actions) a correct agent makes for it, on the data below.\n\n"
        f"# Tools\n{tools}\n\n# The agent's policy\n{domain.policy()}\n\n# Data sample\n{sample}"
    )
    already = "\n".join(f"- {r}" for r in kept) or "(none yet)"
    user = (
        f"Write ONE new blueprint. {WANTED[kind]}\nUse only ids and values that exist in the data. Every output must "
        "be a short string a gold tool result or the scenario contains.\nScenarios already kept (write something "
        f"different):\n{already}\n\nAnswer with one JSON object: "
        '{"kind": ..., "user_scenario": {"reason_for_call": ..., "known_info": ..., "approval": ...}, '
        '"actions": [{"name": ..., "arguments": {...}}], "outputs": [...]}'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def to_task(blueprint: Mapping[str, Any], number: int) -> dict[str, Any]:
    """A tau2 task from a checked blueprint; ``number`` gives its id ``gen-0001``."""
    scenario = blueprint["user_scenario"]
    instructions = {k: scenario[k] for k in ("reason_for_call", "known_info", "approval") if k in scenario}
    actions = [{"name": a["name"], "arguments": dict(a["arguments"])} for a in blueprint["actions"]]
    criteria = {"actions": actions, "communicate_info": list(blueprint["outputs"]), "nl_assertions": []}
    return {
        "id": f"gen-{number:04d}",
        "user_scenario": {"instructions": instructions},
        "evaluation_criteria": criteria,
        "kind": blueprint["kind"],
    }


def judge_instructions(domain: Domain) -> str:
    """The judge's criteria for a generated task, after the domain's policy."""
    return (
        f"You review generated tasks for a tool-use agent. The agent's policy:\n\n{domain.policy()}\n\n"
        "Accept a task only if it is realistic, solvable under the policy, and its gold actions are exactly what the "
        "scenario asks for (nothing missing, nothing extra)."
    )


def _propose(role: JsonRole, messages: list[dict[str, str]], check: Check) -> Any:
    try:
        return role.ask(messages, check)
    except RoleError as exc:
        return exc


class Generation:
    """The state of one run: the tasks kept, the rejections counted by reason, per kind, and the judge's reasons."""

    def __init__(self, domain: Domain, ref: str, judge: Judge | None) -> None:
        self.domain, self.ref, self.judge = domain, ref, judge
        self.seen: Seen = seen_from(domain.tasks().values())
        self.kept: list[dict[str, Any]] = []
        self.rejected: Counter[str] = Counter()
        self.kinds: dict[str, Counter[str]] = {}
        self.judge_reasons: list[dict[str, Any]] = []
        self.rejections: list[dict[str, Any]] = []  # every rejection: request, kind, reason, detail

    def consider(self, request: int, kind: str, found: Any) -> None:
        """Check request ``request``'s answer (a blueprint or its RoleError) and keep it or count why not."""
        self.kinds.setdefault(kind, Counter())["requested"] += 1
        if isinstance(found, RoleError):
            return self._reject(request, kind, "proposer_error", str(found))
        task = to_task(found, len(self.kept) + 1)
        problem = rejection(self.domain, self.ref, task, self.seen)
        if problem is not None:
            return self._reject(request, kind, *problem)
        if self.judge is not None:
            subject = json.dumps({k: task[k] for k in ("user_scenario", "evaluation_criteria")}, ensure_ascii=False)
            try:
                verdict = self.judge.judge(judge_instructions(self.domain), subject)
            except RoleError as exc:
                return self._reject(request, kind, "judge_error", str(exc))
            if not verdict.accept:
                self.judge_reasons.append({"request": request, "kind": kind, "reason": verdict.reason})
                return self._reject(request, kind, "judge_rejected", verdict.reason)
        self.kept.append(task)
        self.seen.add(task)
        self.kinds[kind]["kept"] += 1

    def _reject(self, request: int, kind: str, reason: str, detail: str) -> None:
        self.rejected[reason] += 1
        self.kinds[kind]["rejected"] += 1
        self.rejections.append({"request": request, "kind": kind, "reason": reason, "detail": detail})

    def scenarios(self) -> list[str]:
        return [reason_for_call(t) or "" for t in self.kept]


def _sampled(domain: Domain, pools: dict[str, list[Any]], index: int, seed: int) -> Any:
    try:
        return sample_blueprint(domain, pools, index, seed)
    except ValueError as exc:
        return RoleError("sample", "rule", str(exc))


def generate(
    domain: Domain,
    ref: str,
    proposer: JsonRole | None,
    n: int,
    *,
    judge: Judge | None = None,
    workers: int = 4,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``n`` proposals on ``domain`` (``ref``: how the reward finds it), checked in request order: the tasks kept and
    the report (``requested == kept + sum(rejected)``). With no ``proposer``, blueprints sampled by rule
    (:func:`~rewardkit.runs.tasks.blueprints.sample_blueprint`, kind plain, deterministic in ``seed``)."""
    kinds = kinds_for(domain) if proposer is not None else KINDS[:1]
    data = _export(domain)
    sample, pools = _sample(data), value_pools(data) if proposer is None else {}
    run = Generation(domain, ref, judge)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for start in range(0, n, workers):
            batch = [(i, kinds[i % len(kinds)]) for i in range(start, min(n, start + workers))]
            kept = run.scenarios()
            jobs = [
                pool.submit(_sampled, domain, pools, i, seed)
                if proposer is None
                else pool.submit(
                    _propose, proposer, prompt(domain, sample, kind, kept), blueprint_check(kind, domain.write_tools)
                )
                for i, kind in batch
            ]
            for (i, kind), job in zip(batch, jobs, strict=True):
                run.consider(i, kind, job.result())
    return run.kept, report(run, n, proposer)


def report(run: Generation, n: int, proposer: JsonRole | None) -> dict[str, Any]:
    """The run's report; it asserts that every request was kept or rejected for one reason."""
    rejected = dict(sorted(run.rejected.items()))
    assert n == len(run.kept) + sum(rejected.values()), (n, len(run.kept), rejected)
    ledgers = [proposer.ledger.summary()] if proposer is not None else []
    ledgers += [run.judge.ledger.summary()] if run.judge is not None else []
    return {
        "domain": run.domain.name,
        "requested": n,
        "kept": len(run.kept),
        "rejected": rejected,
        "kinds": {
            k: {"requested": c["requested"], "kept": c["kept"], "rejected": c["rejected"]} for k, c in run.kinds.items()
        },
        "judge_reasons": run.judge_reasons,
        "rejections": run.rejections,
        "ledger": ledgers,
    }


def headline(found: Mapping[str, Any]) -> str:
    """``kept 3 of 5 proposed tasks; rejected: gold_fails 1, duplicate 1``."""
    why = ", ".join(f"{k} {v}" for k, v in found["rejected"].items()) or "none"
    return f"kept {found['kept']} of {found['requested']} proposed tasks; rejected: {why}"
