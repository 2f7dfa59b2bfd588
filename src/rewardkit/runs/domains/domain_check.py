"""``rewardkit env check DOMAIN``: a domain checked before anyone trains on it, one named row per finding.

- ``schema:<tool>``: the parameters are a valid JSON Schema and the OpenAI spec has a description;
- ``idempotency:<tool>``: a write tool declares the optional ``idempotency_key`` property;
- ``gold:<task>``: the shared task checks pass and the gold replays on a fresh environment with no gold write
  failing (the builder's ``gold_fails``), changing the state when the task expects a write, and, when it changes
  nothing, naming what an episode must show instead (an output, a transfer, a declined write: else ``no_evidence``);
- ``outputs:<task>``: every expected output occurs in a gold tool result or in the task's user scenario;
- ``do_nothing:<task>``: for every task the reward scores, an episode without a tool call (a bare "Done.", a polite
  refusal) scores 0 with :class:`~rewardkit.rewards.TaskCompletion`, the reward training uses;
- ``say_only:<task>``: likewise an episode that says the expected outputs and calls nothing, unless saying them is
  the whole task (no write, and nothing to show but the outputs: a question answered from reads);
- ``ids``, ``splits``, ``policy``, ``guidelines``: the domain's task ids, its splits, its policy and its user
  simulator's guidelines.

It scores with the rewards, so it lives above them (:mod:`rewardkit.layers`), not in ``rewardkit.envs``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from rewardkit.envs import Domain, get_domain
from rewardkit.envs.spec_domain import SPEC_FILE
from rewardkit.envs.task_verdict import judge_task
from rewardkit.envs.tasks import communicated_texts, evidence, expected_outputs, gold_actions, reason_for_call
from rewardkit.envs.tool import IDEMPOTENCY_KEY
from rewardkit.rewards import TaskCompletion
from rewardkit.runs.domains.domain_data_check import guidelines_check, ids_check, is_spec, policy_check, splits_check
from rewardkit.testing.probes import REFUSAL
from rewardkit.testing.report import Check, safe_text


@dataclass(frozen=True)
class DomainReport:
    """Every check of one domain, tools first, then the tasks kind by kind, then ids, splits and policy."""

    domain: str  # the reference as given (a name, an entry point, a path)
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` report: ``{"domain", "passed", "checks": [{"name", "passed", "detail"}, ...]}``."""
        rows = [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks]
        return {"domain": safe_text(self.domain), "passed": self.passed, "checks": rows}

    def table_rows(self, every: bool = False) -> list[dict[str, Any]]:
        """The printed table's rows: with ``every``, each check; else each failed check, and for each kind of check
        (``gold``, ``outputs`` …) one ``kind:*`` row counting the rest, which passed."""
        rows = self.as_dict()["checks"]
        if every:
            return rows
        out = []
        for kind, group in groupby(rows, key=lambda r: r["name"].partition(":")[0]):
            group = list(group)
            if len(group) == 1 and ":" not in group[0]["name"]:  # ids, splits, policy, guidelines: one check each
                out += group
                continue
            failed = [r for r in group if not r["passed"]]
            out += failed
            if len(failed) < len(group):
                rest = f"the other {len(group) - len(failed)}" if failed else f"all {len(group)}"
                out.append({"name": f"{kind}:*", "passed": True, "detail": f"{rest} passed"})
        return out


# Episodes that do nothing: no tool call, a bare ending or a polite refusal. Every task must score each 0.
DO_NOTHING = ("Done.", REFUSAL)


@dataclass(frozen=True)
class Gold:
    """A task's gold replayed on a fresh environment, as the report reads its verdict: why it cannot judge the task
    (None: it can, and the reward scores its episodes), the results' texts (None: nothing ran) and whether an
    episode that only says the outputs falls short of the task (it expects a write, or shows a call or a declined
    write)."""

    problem: str | None
    texts: tuple[str, ...] | None
    say_only: bool = False
    detail: str = ""


def words_fall_short(domain: Domain, task: Mapping[str, Any], writes: bool) -> bool:
    """Whether saying the expected outputs, with no call, leaves ``task`` undone: it expects a write, or its gold
    changes nothing and names a call or a declined write to show (:func:`~rewardkit.envs.tasks.evidence`)."""
    return writes or any(e.kind not in ("output", "refused") for e in evidence(task, domain.stop_tools))


def check_domain(ref: str, tasks: Mapping[str, Any] | None = None) -> DomainReport:
    """Every check of the domain ``ref`` names (DomainError when it cannot be loaded); with ``tasks`` (id -> task,
    a tasks file's), those tasks instead of the domain's own, in one split ``all``."""
    domain = get_domain(ref)
    splits = domain.splits() if tasks is None else {"all": list(tasks)}
    if tasks is not None:  # the domain's bundled task files are not the ones checked
        domain = replace(domain, tasks=lambda: tasks, data_files=())
    tasks = domain.tasks()
    golds = {task_id: replay_gold(domain, task) for task_id, task in tasks.items()}
    reward, from_spec = TaskCompletion(), is_spec(domain)
    keys = [f"{SPEC_FILE}'s tools[{i}]" if from_spec else None for i in range(len(domain.tools))]
    checks = [*map(schema_check, domain.tools.values(), keys)]
    checks += [idempotency_check(spec) for spec in domain.tools.values() if spec.risk == "write"]
    checks += [gold_check(i, g) for i, g in golds.items()]
    checks += [outputs_check(i, tasks[i], g) for i, g in golds.items() if g.texts is not None]
    scored = [episode_checks(reward, ref, i, tasks[i], g.say_only) for i, g in golds.items() if g.problem is None]
    checks += [nothing for nothing, _ in scored] + [said for _, said in scored if said is not None]
    checks += [ids_check(domain, tasks), splits_check(splits, tasks, from_spec)]
    checks.append(policy_check(domain.policy(), from_spec))
    checks.append(guidelines_check(domain.guidelines() if domain.guidelines is not None else None, from_spec))
    return DomainReport(ref, tuple(checks))


def schema_check(spec: Any, key: str | None = None) -> Check:
    """The tool's parameters are a JSON Schema (Draft 2020-12) and its OpenAI spec has a non-empty description;
    ``key`` is where a spec declares the tool (``domain.json's tools[3]``), for the fix."""
    name = f"schema:{spec.name}"
    try:
        Draft202012Validator.check_schema(spec.parameters)
    except SchemaError as exc:
        return Check(name, False, f"parameters is not a valid JSON Schema: {exc.message}")
    description = (spec.openai().get("function") or {}).get("description")
    if not isinstance(description, str) or not description.strip():
        if key is not None:
            return Check(name, False, f"{key}.description is blank: the model would not know what the tool does")
        return Check(name, False, "the OpenAI spec has no description: the model would not know what the tool does")
    return Check(name, True, f"valid JSON Schema; {description.strip()[:80]}")


def idempotency_check(spec: Any) -> Check:
    """A write tool's schema offers the model the optional ``idempotency_key`` (a retry never writes twice)."""
    properties = spec.parameters.get("properties") or {}
    if IDEMPOTENCY_KEY not in properties:
        why = f"a write tool without an optional {IDEMPOTENCY_KEY!r} property: a retried write may apply twice"
        return Check(f"idempotency:{spec.name}", False, why)
    if IDEMPOTENCY_KEY in (spec.parameters.get("required") or []):
        return Check(f"idempotency:{spec.name}", False, f"{IDEMPOTENCY_KEY!r} is required; it must be optional")
    return Check(f"idempotency:{spec.name}", True, f"declares the optional {IDEMPOTENCY_KEY!r}")


def replay_gold(domain: Domain, task: Any) -> Gold:
    """The task's verdict (:func:`~rewardkit.envs.task_verdict.judge_task`) as the ``gold`` row reports it."""
    verdict = judge_task(domain, task)
    if verdict.problem is not None:
        return Gold(": ".join(verdict.problem), verdict.texts)
    actions, writes = gold_actions(task), verdict.writes
    changed = f"{writes} write(s), the state changed" if writes else "no write expected"
    detail = f"{len(actions)} gold action(s) replayed, {changed}"
    reads_failed = verdict.failed_calls()  # only reads: a failed write is the verdict's gold_fails
    if reads_failed:
        detail += f"; {len(reads_failed)} read(s) failed, as reads may: {reads_failed[0][2][:80]}"
    return Gold(None, verdict.texts, words_fall_short(domain, task, bool(writes)), detail)


def gold_check(task_id: Any, gold: Gold) -> Check:
    """The ``gold:<task>`` row; a task the reward cannot score says that its episodes were not."""
    if gold.problem is None:
        return Check(f"gold:{task_id}", True, gold.detail)
    return Check(f"gold:{task_id}", False, f"{gold.problem}; do_nothing and say_only are not scored")


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (the user scenario's text, whatever its shape)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def outputs_check(task_id: Any, task: Mapping[str, Any], gold: Gold) -> Check:
    """Every expected output occurs in a gold tool result's text or in the user scenario (else only a guess
    produces it), compared as the reward compares what the agent said."""
    outputs = expected_outputs(task)
    sources = [*(gold.texts or ()), *_strings(task.get("user_scenario"))]
    missing = [out for out, ok in zip(outputs, communicated_texts(sources, outputs), strict=True) if not ok]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5])
        why = "the gold never shows it to the agent (computed, read by calls the gold lacks, or guessed)"
        return Check(f"outputs:{task_id}", False, f"{shown}: in no gold tool result nor the user scenario; {why}")
    found = f"{len(outputs)} expected output(s), each in a gold tool result or the scenario"
    return Check(f"outputs:{task_id}", True, found if outputs else "no expected output")


def episode_checks(
    reward: TaskCompletion, ref: str, task_id: Any, task: Mapping[str, Any], say_only: bool
) -> tuple[Check, Check | None]:
    """``do_nothing`` (each of :data:`DO_NOTHING`) and, with ``say_only``, ``say_only`` (the expected outputs said):
    no episode calls a tool, so each must score 0 (rows ``{"messages", "task", "domain"}``, as ``rewardkit build
    tau2-grpo`` writes them)."""
    user = {"role": "user", "content": reason_for_call(task) or "Please help me."}
    said = "; ".join(expected_outputs(task))
    texts = [*DO_NOTHING, f"Done. {said}"] if say_only else list(DO_NOTHING)
    episodes = [[user, {"role": "assistant", "content": text}] for text in texts]
    scores = reward([""] * len(texts), messages=episodes, task=[task] * len(texts), domain=[ref] * len(texts))
    score, text = next(((s, t) for s, t in zip(scores, DO_NOTHING, strict=False) if s != 0.0), (0.0, None))
    ending = f"ending {text!r}" if text else "(ending 'Done.', or refusing politely)"
    nothing = _zero(f"do_nothing:{task_id}", score, f"an episode with no tool call {ending}")
    if not say_only:
        return nothing, None
    episode = f"saying {said[:60]!r} with no tool call" if said else "an episode with nothing to say and no tool call"
    return nothing, _zero(f"say_only:{task_id}", scores[-1], episode)


def _zero(name: str, score: float | None, episode: str) -> Check:
    if score == 0.0:
        return Check(name, True, f"TaskCompletion scores {episode} 0")
    why = "the gold state is the fresh state, so the reward cannot tell the task done from not done"
    return Check(name, False, f"TaskCompletion scores {episode} {score}: {why}")
