"""The rewards' config sections: every planning and agent reward's settings, and the top-level ones they share.

Each class is one ``key:`` section of ``$REWARDKIT_CONFIG`` (``key`` = the reward's registry key; ``expert_match``
is read by ExpertMatch, PlanCoverage and every planning reward's gold check) and each field a
:func:`~rewardkit.config.setting`: its default, its meaning and its range. The reward's own file imports its
section from here (``ThinkLengthConfig`` is also ``rewardkit.rewards.think_length.ThinkLengthConfig``).

They live here, not beside each formula, because the reward base class loads the whole schema
(``rewardkit.rewards.config.REWARD_SCHEMA``): a section in a reward's file would make that file and the schema
import each other. So this module imports no reward, and building a planning reward never imports the agent ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rewardkit.config import config_section, setting


@dataclass(frozen=True)
class SharedConfig:
    """Top-level settings: the planning rewards' answer schema and similarity backend, and the agent rows' domain."""

    SECTION: ClassVar[str] = ""  # top level, not a section

    schema: str = setting(
        "zh",
        'Answer JSON: `zh` = {"补全后的问题", "plan": [{"专家", "处理问题", "depends_on"?}]}, `en`, '
        "or a JSON Schema file (which also needs `schema_keys`).",
        min_length=1,
    )
    schema_keys: Mapping[str, str] | None = setting(
        None,
        "For a JSON Schema file: the answer's field names, {rewrite, plan, expert, tasks}.",
        json_schema={
            "type": ["object", "null"],
            "additionalProperties": False,
            # rewardkit.rewards._schema.KEY_NAMES
            "properties": {k: {"type": "string"} for k in ("rewrite", "plan", "expert", "tasks")},
        },
    )
    backend: Literal["lexical", "embedding"] = setting(
        "lexical",
        "Similarity for RewriteSimilarity and PlanCoverage: `lexical` (rapidfuzz, no model) "
        "or `embedding` (sentence-transformers).",
    )
    embedding_model: str | None = setting(
        None,
        "Local sentence-transformers directory for `backend: embedding`; loaded once per process, "
        "outside DeepSpeed ZeRO-3 partitioning.",
    )
    embedding_device: str = setting("cpu", "Device of the embedding model.", min_length=1)
    domain: str | None = setting(
        None,
        "A domain every process loads before it reads a row (a built-in name, an installed package's entry point "
        "or the absolute path of a domain's folder or module), so that rows may name it by its name; "
        "`recipe run agent` writes it.",
        min_length=1,
    )

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        if raw.get("backend") == "embedding" and not raw.get("embedding_model"):
            return "embedding_model", "backend 'embedding' needs a local sentence-transformers model path"
        return None


@config_section("think_length")
@dataclass(frozen=True)
class ThinkLengthConfig:
    """The band of think lengths that scores 1.0, and the curve outside it."""

    unit: Literal["chars", "tokens"] = setting(
        "chars", "What L counts: characters, or tokens of the training model's tokenizer (from `args.model`)."
    )
    min: int = setting(50, "Shortest think that scores 1.0; a row's `think_min` cell overrides it.", minimum=0)
    max: int = setting(300, "Longest think that scores 1.0; a row's `think_max` cell overrides it.", minimum=0)
    eps: float | None = setting(None, "S-curve width; null = max(max - min, 1).", exclusive_minimum=0)
    mode: Literal["reference", "smooth"] = setting(
        "smooth",
        "`smooth` starts the S-curve at the band edge; `reference` is the planner's original curve, "
        "which jumps from 1.0 to 0.5 at the band edges.",
    )

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        if raw.get("min", 0) > raw.get("max", float("inf")):
            return "min", f"min ({raw['min']}) must be <= think_length.max ({raw['max']})"
        return None


@config_section("think_quality")
@dataclass(frozen=True)
class ThinkQualityConfig:
    """What zeroes a think (banned keywords) and how much repetition costs."""

    banned: tuple[str, ...] = setting(
        (), "Keywords that zero the think (NFKC, case-insensitive substring match).", item_min_length=1
    )
    banned_file: str | None = setting(None, "UTF-8 file of more banned keywords, one a line.")
    repetition_ngram: int = setting(3, "n of the distinct n-gram ratio, over words and CJK characters.", minimum=1)
    min_distinct_ratio: float = setting(
        0.5,
        "Distinct n-gram ratio at or above which repetition costs nothing; below it the reward is ratio / this.",
        exclusive_minimum=0,
        maximum=1,
    )


@config_section("rewrite_similarity")
@dataclass(frozen=True)
class RewriteSimilarityConfig:
    """How the semantic and the coverage part of the rewrite score mix."""

    alpha: float = setting(0.5, "Reward = alpha * semantic + (1 - alpha) * coverage.", minimum=0, maximum=1)
    cjk_units: Literal["char", "bigram"] = setting("bigram", "Coverage units for Chinese text: characters or bigrams.")


@config_section("expert_match")
@dataclass(frozen=True)
class ExpertMatchConfig:
    """Expert-name matching, shared by ExpertMatch, PlanCoverage and every planning reward's gold check."""

    fuzzy_threshold: float = setting(
        85.0,
        "rapidfuzz ratio at or above which a name that is not an exact match (after NFKC, whitespace removal "
        "and casefolding) maps onto the row's `experts` list.",
        minimum=0,
        maximum=100,
    )


@dataclass(frozen=True)
class PlanCoverageWeights:
    """Weights of the four parts in the weighted mean (normalised over the parts present)."""

    coverage: float = setting(0.4, "Weight of coverage: the share of gold items matched.", minimum=0)
    quality: float = setting(0.3, "Weight of quality: the mean similarity of the matched pairs.", minimum=0)
    diversity: float = setting(0.1, "Weight of diversity: 1 - the near-duplicate rate of predicted items.", minimum=0)
    dependency: float = setting(
        0.2, "Weight of dependency: F1 of the gold's `depends_on` edges (only when the gold has some).", minimum=0
    )


@config_section("plan_coverage")
@dataclass(frozen=True)
class PlanCoverageConfig:
    """How predicted (expert, sub-question) items match the gold's, and how the parts weigh."""

    match_threshold: float = setting(
        0.5, "Similarity at or above which an assigned pair counts as a match.", minimum=0, maximum=1
    )
    duplicate_threshold: float = setting(
        0.9, "Similarity at or above which a predicted item duplicates an earlier one.", minimum=0, maximum=1
    )
    cross_expert: float = setting(
        0.5, "Similarity factor when a sub-question sits under a different expert.", minimum=0, maximum=1
    )
    weights: PlanCoverageWeights = setting(PlanCoverageWeights(), "Weights of the parts.")  # noqa: RUF009 (a field)

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        weights = raw.get("weights", {})
        if weights and sum(weights.values()) <= 0:
            return "weights", "at least one weight must be > 0"
        return None


@config_section("task_completion")
@dataclass(frozen=True)
class TaskCompletionConfig:
    """Which rule decides that a tau2 task is complete."""

    require_outputs: bool = setting(
        True,
        "true: tau2-bench's rule (the final database is right and every expected output was said); "
        "false: MUA-RL's (the final database alone).",
    )
