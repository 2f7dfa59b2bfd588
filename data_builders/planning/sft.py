"""planning-sft: R1-distilled teacher outputs → ms-swift SFT rows, filtered by the rewards.

Input record (``tools``/``products``/``gold`` optional)::

    {"id": "p1-t0001", "query": "查看经营周报", "history": [],
     "experts": ["全网搜索专家", "数据分析专家", "策略推荐专家"], "tools": ["经营周报"],
     "output": "<think>\\n用户想看经营周报，属于数据分析专家。\\n</think>\\n\\n<answer>\\n{...}\\n</answer>",
     "gold": {"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]}}

Output row::

    {"messages": [{"role": "system", "content": "<rendered prompt>"},
                  {"role": "user", "content": "查看经营周报"},
                  {"role": "assistant", "content": "<think>\\n…\\n</think>\\n\\n<answer>\\n{...}\\n</answer>"}],
     "id": "p1-t0001"}

A record is kept only if, judged by rewardkit's own reward code: StrictFormat
is 1 (``format``), JsonValid is 1 (``json_schema``), every expert is in the
row's list (``expert_not_in_list``), the experts equal the gold's where there is
a gold (``experts_mismatch``), ThinkQuality is not 0 (``think_quality``), and
the think length lies in [think_min, think_max] characters (``think_length``).
``keep_shortest`` then keeps that fraction of each input's survivors, shortest
thinks first (``not_shortest``), as the planner write-up prefers short teacher samples.
Before any filter, a record that is not a JSON object with the required fields is
``malformed`` and one with a field of the wrong type (``gold`` included) is
``bad_field:<name>``; under ``--on-error stop`` either stops the build.
With ``no_think`` the assistant target is the answer block alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.data_builders._io import BuildError, BuildReport, Record, read_records
from rewardkit.data_builders.planning._common import BuildOptions, InputSpec, PromptTemplate, mix_and_count
from rewardkit.data_builders.planning._records import SFT, field_problem, sft_gold_problem
from rewardkit.data_builders.planning.grpo import gold_answer, plan_experts
from rewardkit.rewards import RewardConfig, SharedConfig, ThinkQuality
from rewardkit.rewards.answers import AnswerSchema, ExpertIndex, load_schema, normalize_name, parse, read_plan
from rewardkit.rewards.strict_format import matches_strict_format
from rewardkit.rewards.think_quality import ThinkQualityConfig

REQUIRED = ("query", "experts", "output")
# The expert rule is the rewards' (ExpertIndex: NFKC, whitespace and case folded, then a rapidfuzz ratio), with the
# threshold at 100: SFT data teaches the canonical names, so a teacher output with a near miss ("数据分析专家x") is
# dropped, while ExpertMatch (threshold 85 by default) forgives the same near miss in a rollout.
SFT_EXPERT_THRESHOLD = 100.0


@dataclass(frozen=True)
class SftOptions(BuildOptions):
    think_min: int = 20
    think_max: int = 300
    keep_shortest: float = 1.0
    # The ThinkQuality filter's settings: the builder's own, never $REWARDKIT_CONFIG, so that the
    # environment cannot change which data gets built.
    think_quality: ThinkQualityConfig = field(default_factory=ThinkQualityConfig)

    def __post_init__(self) -> None:
        if not 0 < self.keep_shortest <= 1:
            raise BuildError("--keep-shortest must be in (0, 1]")
        if self.think_min > self.think_max:
            raise BuildError(f"--think-min ({self.think_min}) must be <= --think-max ({self.think_max})")


def filter_config(opts: SftOptions) -> RewardConfig:
    """The reward config of the SFT filter, from ``opts`` alone (``RewardConfig.of`` never reads the environment)."""
    shared = SharedConfig(schema=opts.schema) if opts.schema in ("zh", "en") else SharedConfig()
    return RewardConfig.of(shared, opts.think_quality)


class TeacherFilter:
    def __init__(self, opts: SftOptions, schema: AnswerSchema) -> None:
        self.opts = opts
        self.schema = schema
        self.quality = ThinkQuality(config=filter_config(opts))

    def reason(self, data: dict[str, Any]) -> str | None:
        """Why the teacher output is rejected, or None to keep it (the fields are checked already)."""
        output = data["output"]
        if not matches_strict_format(output):
            return "format"
        plan = read_plan(output, self.schema)
        if plan is None:
            return "json_schema"
        listed = ExpertIndex(data["experts"], threshold=SFT_EXPERT_THRESHOLD)
        if any(listed.resolve(step.expert) is None for step in plan.steps or ()):
            return "expert_not_in_list"
        gold = data.get("gold")
        if gold is not None:
            gold_plan = gold.get(self.schema.plan_key) or gold.get("plan") or []
            gold_set = {normalize_name(str(s.get(self.schema.expert_key, s.get("专家", "")))) for s in gold_plan}
            if plan_experts(plan) != gold_set:
                return "experts_mismatch"
        think = parse(output).think
        if self.quality.quality(think) == 0.0:
            return "think_quality"
        if not self.opts.think_min <= len(think or "") <= self.opts.think_max:
            return "think_length"
        return None


def _target(output: str, schema: AnswerSchema, no_think: bool) -> str:
    if not no_think:
        return output
    data = parse(output).data or {}
    plan = data.get(schema.plan_key, [])
    answer = gold_answer(data.get(schema.rewrite_key, ""), plan, schema)
    return "<answer>\n" + json.dumps(answer, ensure_ascii=False) + "\n</answer>"


def build_sft(inputs: Sequence[InputSpec], opts: SftOptions) -> tuple[list[dict[str, Any]], BuildReport]:
    report = BuildReport()
    schema = load_schema(opts.schema)
    prompt = PromptTemplate(opts.prompt, no_think=opts.no_think, history_turns=opts.history_turns)
    keep = TeacherFilter(opts, schema)
    groups: list[list[tuple[Record, dict[str, Any]]]] = []
    for spec in inputs:
        kept: list[tuple[int, Record, dict[str, Any]]] = []
        for record in read_records(spec.path, report, REQUIRED, opts.on_error):
            bad = field_problem(record.data, SFT)
            gold = record.data.get("gold")
            if bad is None and gold is not None and (wrong := sft_gold_problem(gold, schema)):
                bad = ("bad_field:gold", wrong)
            if bad:
                report.problem(record, *bad, opts.on_error)
                continue
            reason = keep.reason(dict(record.data))
            if reason:
                report.reject(record, reason)
                continue
            output = record.data["output"]
            row: dict[str, Any] = {
                "messages": [
                    *prompt.messages(record.data),
                    {"role": "assistant", "content": _target(output, schema, opts.no_think)},
                ]
            }
            if record.data.get("id") is not None:
                row["id"] = record.data["id"]
            kept.append((len(parse(output).think or ""), record, row))
        # Shortest thinks first; the source position breaks ties deterministically.
        kept.sort(key=lambda item: item[0])
        n_keep = math.ceil(opts.keep_shortest * len(kept))
        for _, record, _ in kept[n_keep:]:
            report.reject(record, "not_shortest")
        groups.append([(record, row) for _, record, row in kept[:n_keep]])
    return mix_and_count(groups, inputs, opts.seed, report), report
