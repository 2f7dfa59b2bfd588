"""RewriteSimilarity: how close is the rewritten query to the gold rewrite?"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from rewardkit.config import config_section, setting
from rewardkit.rewards._base import PlanningReward, known_gaps
from rewardkit.rewards._parsing import read_plans
from rewardkit.rewards._similarity import backend_for
from rewardkit.rewards._text import CjkUnit, content_units


def _covered(pred_units: set[str], gold_units: set[str]) -> float:
    return len(gold_units & pred_units) / len(gold_units) if gold_units else 1.0


@config_section("rewrite_similarity")
@dataclass(frozen=True)
class RewriteSimilarityConfig:
    """How the semantic and the coverage part of the rewrite score mix."""

    alpha: float = setting(0.5, "Reward = alpha * semantic + (1 - alpha) * coverage.", minimum=0, maximum=1)
    cjk_units: Literal["char", "bigram"] = setting("bigram", "Coverage units for Chinese text: characters or bigrams.")


class RewriteSimilarity(PlanningReward):
    r"""Similarity of the predicted rewritten query to the gold one.

    Formula: ``alpha * semantic + (1 - alpha) * coverage`` where ``semantic``
    is the backend similarity (``lexical``: rapidfuzz normalised Levenshtein
    ratio; ``embedding``: cosine of sentence embeddings, clipped at 0) and
    ``coverage`` is the share of the gold's content units (Latin words, CJK
    characters or bigrams per ``rewrite_similarity.cjk_units``) present in the
    prediction. 0.0 when the answer is not schema-valid JSON.
    Config: ``rewrite_similarity`` (:class:`RewriteSimilarityConfig`, above) and the
    top-level ``backend``.
    Columns: ``solution``. Range: [0, 1]. None when the gold has no rewrite.

    Example (lexical backend, alpha 0.5)::

        >>> from rewardkit.rewards import RewriteSimilarity
        >>> def done(rewrite):
        ...     answer = '{"补全后的问题": "%s", "plan": []}' % rewrite
        ...     return f"<think>\n改写用户的问题。\n</think>\n\n<answer>\n{answer}\n</answer>"
        >>> gold = '{"补全后的问题": "查看经营周报", "plan": []}'
        >>> scores = RewriteSimilarity()([done("查看经营周报"), done("查看周报"), "no answer"], solution=[gold] * 3)
        >>> [round(s, 3) for s in scores]  # 查看周报: 0.5 * ratio 0.8 + 0.5 * (2 of the gold's 5 bigrams)
        [1.0, 0.6, 0.0]
    """

    section = RewriteSimilarityConfig
    order = 50
    sets = MappingProxyType({"planner": 0.2, "planner_no_think": 0.2})

    columns = ("solution",)
    gameable = known_gaps(
        "it scores the rewritten question alone; ExpertMatch and PlanCoverage score the plan",
        *("swapped_expert", "exchanged_experts", "dropped_step"),
    )
    optional_columns = ("experts",)  # when present, each row's gold experts are checked against it too

    def __init__(self, args: Any = None, config: Any = None, **kwargs: Any) -> None:
        super().__init__(args, config, **kwargs)
        self.cfg = self.config.section(RewriteSimilarityConfig)
        self.alpha = self.cfg.alpha
        self.cjk: CjkUnit = "char" if self.cfg.cjk_units == "char" else "bigram"
        self.backend = backend_for(self.config.shared)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        golds = self.rows(columns).golds
        pairs: dict[int, tuple[str, str]] = {}
        rewards: list[float | None] = [None] * len(completions)
        for i, (plan, gold) in enumerate(zip(read_plans(completions, self.schema), golds, strict=True)):
            if gold is None or gold.rewrite is None:
                continue
            if plan is None or not plan.rewrite:
                rewards[i] = 0.0
            else:
                pairs[i] = (plan.rewrite, gold.rewrite)
        if pairs:
            session = self.backend.session(t for pair in pairs.values() for t in pair)
            unique = list(dict.fromkeys(pairs.values()))  # rollouts that rewrote alike: each pair scored once
            semantic = dict(zip(unique, session.pairwise(*zip(*unique, strict=True)).tolist(), strict=True))
            gold_units: dict[str, set[str]] = {}
            for i, (pred, gold_text) in pairs.items():
                if gold_text not in gold_units:
                    gold_units[gold_text] = content_units(gold_text, self.cjk)
                coverage = _covered(content_units(pred, self.cjk), gold_units[gold_text])
                rewards[i] = self.alpha * semantic[pred, gold_text] + (1 - self.alpha) * coverage
        return rewards
