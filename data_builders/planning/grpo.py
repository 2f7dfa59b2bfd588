"""planning-grpo: annotated plans → ms-swift GRPO rows.

Input record (one JSONL line; ``tools``/``products`` optional)::

    {"id": "p1-a0001", "query": "那上上个月呢？",
     "history": [{"role": "user", "content": "帮我分析一下上个月的营收"},
                 {"role": "assistant", "content": "上个月营收12.3万元。"}],
     "experts": ["全网搜索专家", "数据分析专家", "策略推荐专家"],
     "rewrite": "分析上上个月的营收",
     "plan": [{"专家": "数据分析专家", "处理问题": ["分析上上个月的营收"]}]}

Output row::

    {"messages": [{"role": "system", "content": "<recipes/planning/system_prompt.txt rendered>"},
                  {"role": "user", "content": "那上上个月呢？"}],
     "solution": "{\\"补全后的问题\\": \\"分析上上个月的营收\\", \\"plan\\": [...]}",
     "experts": ["全网搜索专家", "数据分析专家", "策略推荐专家"], "id": "p1-a0001"}

Plans in the input use the zh step keys (专家, 处理问题, depends_on); ``--schema en``
renames them. Rejected: ``malformed`` (not a JSON object with the required fields),
``bad_field:<name>`` (a field of the wrong type, see ``_records``), ``gold_invalid``
(``rewrite`` is not a string, ``plan`` is not a list of steps, the gold fails the
schema or its depends_on points forward), ``gold_expert_not_in_list``, ``mix_downsampled``.
Under ``--on-error stop`` a malformed record or a bad field stops the build instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.data_builders._io import BuildReport, Record, read_records
from rewardkit.data_builders.planning._common import BuildOptions, InputSpec, PromptTemplate, mix_and_count
from rewardkit.data_builders.planning._records import GRPO, field_problem, grpo_gold_problem
from rewardkit.rewards.answers import AnswerSchema, Plan, load_schema, normalize_name, read_plan

REQUIRED = ("query", "experts", "rewrite", "plan")


GrpoOptions = BuildOptions  # planning-grpo has no options beyond the shared ones


def gold_answer(rewrite: str, plan: Sequence[Mapping[str, Any]], schema: AnswerSchema) -> dict[str, Any]:
    """The gold as the schema's answer object (zh step keys renamed for other presets)."""
    steps = []
    for step in plan:
        out: dict[str, Any] = {
            schema.expert_key: step.get("专家", step.get(schema.expert_key)),
            schema.tasks_key: step.get("处理问题", step.get(schema.tasks_key)),
        }
        if "depends_on" in step:
            out["depends_on"] = step["depends_on"]
        steps.append(out)
    return {schema.rewrite_key: rewrite, schema.plan_key: steps}


def plan_experts(plan: Plan) -> set[str]:
    """The plan's experts, normalised as the rewards compare them."""
    return {normalize_name(s.expert) for s in plan.steps or ()}


GOLD_DETAILS = {
    "gold_invalid": "the gold answer fails the answer schema, or a depends_on points at a later step",
    "gold_expert_not_in_list": "a plan step names an expert that is not in the row's experts",
}


def check_gold(answer: Mapping[str, Any], experts: Sequence[str], schema: AnswerSchema) -> str | None:
    """Why this gold cannot train, or None when it is fine."""
    text = f"<answer>{json.dumps(answer, ensure_ascii=False)}</answer>"
    plan = read_plan(text, schema)  # the same schema + DAG check the JsonValid reward applies
    if plan is None:
        return "gold_invalid"
    if not plan_experts(plan) <= {normalize_name(e) for e in experts}:
        return "gold_expert_not_in_list"
    return None


def _row(
    record: Record, schema: AnswerSchema, prompt: PromptTemplate, report: BuildReport, opts: GrpoOptions
) -> dict[str, Any] | None:
    """The GRPO row for ``record``, or None when it is rejected (or raise under --on-error stop)."""
    data = record.data
    bad = field_problem(data, GRPO)
    if bad:
        report.problem(record, *bad, opts.on_error)
        return None
    shape = grpo_gold_problem(data, schema)
    if shape:
        report.reject(record, "gold_invalid", shape)
        return None
    answer = gold_answer(data["rewrite"], data["plan"], schema)
    reason = check_gold(answer, data["experts"], schema)
    if reason:
        report.reject(record, reason, GOLD_DETAILS[reason])
        return None
    row = {
        "messages": prompt.messages(data),
        "solution": json.dumps(answer, ensure_ascii=False),
        "experts": list(data["experts"]),
    }
    if data.get("id") is not None:
        row["id"] = data["id"]
    return row


def build_grpo(inputs: Sequence[InputSpec], opts: GrpoOptions) -> tuple[list[dict[str, Any]], BuildReport]:
    report = BuildReport()
    schema = load_schema(opts.schema)
    prompt = PromptTemplate(opts.prompt, no_think=opts.no_think, history_turns=opts.history_turns)
    groups: list[list[tuple[Record, dict[str, Any]]]] = []
    for spec in inputs:
        kept: list[tuple[Record, dict[str, Any]]] = []
        for record in read_records(spec.path, report, REQUIRED, opts.on_error):
            row = _row(record, schema, prompt, report, opts)
            if row is not None:
                kept.append((record, row))
        groups.append(kept)
    return mix_and_count(groups, inputs, opts.seed, report), report
