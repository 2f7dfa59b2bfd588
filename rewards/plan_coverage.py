"""PlanCoverage: do the plan's (expert, sub-question) items cover the gold plan?"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment

from rewardkit.config import config_section, setting
from rewardkit.rewards._base import PlanningReward, known_gaps
from rewardkit.rewards._parsing import Plan, read_plans
from rewardkit.rewards._similarity import Session, backend_for
from rewardkit.rewards._text import ExpertIndex


class Item(NamedTuple):  # a tuple: thousands are built per batch
    step: int
    expert: str
    task: str


def items(plan: Plan, resolve: Any) -> list[Item]:
    return [Item(i, resolve(s.expert), t) for i, s in enumerate(plan.steps or ()) for t in s.tasks]


def edges(plan: Plan) -> set[tuple[int, int]]:
    return {(d, i) for i, s in enumerate(plan.steps or ()) for d in s.depends_on}


def mean(values: Sequence[float]) -> float:
    """``float(np.mean(values))``, exactly: numpy adds fewer than 8 values in order, as ``sum`` does, and pairwise
    from 8 on (a list that short is a plan's matched pairs, and numpy's call costs more than the sum)."""
    return sum(values) / len(values) if len(values) < 8 else float(np.mean(values))


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


class PlanCoverage(PlanningReward):
    r"""Optimal one-to-one matching of predicted to gold (expert, sub-question) items.

    Item similarity is the backend's similarity of the two sub-questions, times
    ``plan_coverage.cross_expert`` when the (resolved) experts differ. Items
    are paired by ``scipy.optimize.linear_sum_assignment`` maximising total
    similarity; a pair counts as a match when its similarity >= ``match_threshold``.

    - coverage = matched gold items / gold items
    - quality = mean similarity of the matched pairs (0 with no match)
    - diversity = 1 - (predicted items near-duplicating an earlier predicted item,
      similarity >= ``duplicate_threshold``) / predicted items
    - dependency = F1 between the gold ``depends_on`` edges, mapped through the
      matching onto predicted steps, and the predicted edges; only when the gold
      has ``depends_on`` (otherwise its weight is dropped)

    Reward = ``sum(w_k * c_k) / sum(w_k)`` over the present components with
    ``plan_coverage.weights``. Both plans empty = 1.0, exactly one empty = 0.0,
    answer not schema-valid JSON = 0.0.
    Config: ``plan_coverage`` (:class:`PlanCoverageConfig`, above), the top-level
    ``backend``, and ``expert_match.fuzzy_threshold`` (:class:`ExpertMatchConfig`), with which item
    experts resolve to the row's list exactly as in ExpertMatch.
    Columns: ``solution``, ``experts``. Range: [0, 1]. None when the gold has no plan.

    Example (default weights coverage 0.4, quality 0.3, diversity 0.1; the gold has no depends_on)::

        >>> from rewardkit.rewards import PlanCoverage
        >>> def plan(*steps):
        ...     items = ", ".join('{"专家": "%s", "处理问题": ["%s"]}' % step for step in steps)
        ...     return '{"补全后的问题": "分析营收并推荐策略", "plan": [%s]}' % items
        >>> def done(answer):
        ...     return f"<think>\n拆成两步。\n</think>\n\n<answer>\n{answer}\n</answer>"
        >>> analyse, advise = ("数据分析专家", "分析上月营收"), ("策略推荐专家", "推荐三个优化策略")
        >>> gold = plan(analyse, advise)
        >>> completions = [done(gold), done(plan(analyse)), done(plan(("策略推荐专家", "分析上月营收"), advise))]
        >>> scores = PlanCoverage()(completions, solution=[gold] * 3, experts=[[analyse[0], advise[0]]] * 3)
        >>> [round(s, 3) for s in scores]  # half the gold: (0.4*0.5 + 0.3 + 0.1) / 0.8
        [1.0, 0.75, 0.906]

    In the third, one item sits under the wrong expert, so its similarity is halved (``cross_expert``):
    quality = (1 + 0.5) / 2 and the reward is (0.4 + 0.3*0.75 + 0.1) / 0.8.
    """

    section = PlanCoverageConfig
    order = 70
    sets = MappingProxyType({"planner": 0.1, "planner_no_think": 0.1})

    columns = ("solution", "experts")
    gameable = known_gaps("it scores the plan's steps, not the rewrite; RewriteSimilarity scores that", "unrewritten")

    def __init__(self, args: Any = None, config: Any = None, **kwargs: Any) -> None:
        super().__init__(args, config, **kwargs)
        self.cfg = self.config.section(PlanCoverageConfig)
        self.weights = dataclasses.asdict(self.cfg.weights)  # part -> its weight
        self.backend = backend_for(self.config.shared)

    def _similarity(self, pred: list[Item], gold: list[Item], session: Session) -> list[list[float]]:
        sim = session.matrix([p.task for p in pred], [g.task for g in gold])
        cross = self.cfg.cross_expert
        return [
            [v if p.expert == g.expert else v * cross for v, g in zip(row, gold, strict=True)]
            for row, p in zip(sim, pred, strict=True)
        ]

    def _diversity(self, pred: list[Item], session: Session) -> float:
        if len(pred) < 2:
            return 1.0
        sim = self._similarity(pred, pred, session)
        threshold = self.cfg.duplicate_threshold
        dup = sum(any(v >= threshold for v in row[:i]) for i, row in enumerate(sim))  # an earlier item alike
        return 1.0 - float(dup) / len(pred)

    def _dependency(self, plan: Plan, gold: Plan, step_map: dict[int, int]) -> float:
        gold_edges = edges(gold)
        pred_edges = edges(plan)
        mapped = {(step_map[a], step_map[b]) for a, b in gold_edges if a in step_map and b in step_map}
        # Unmapped gold edges stay in the denominator: they are misses.
        return 2 * len(mapped & pred_edges) / (len(gold_edges) + len(pred_edges))

    def coverage(self, plan: Plan | None, gold: Plan, index: ExpertIndex, session: Session) -> float:
        if plan is None:
            return 0.0
        pred_items = items(plan, lambda e: index.resolve(e) or e)
        gold_items = items(gold, str)  # the gold's experts were resolved when the row was validated
        if not pred_items or not gold_items:
            return float(not pred_items and not gold_items)
        sim = self._similarity(pred_items, gold_items, session)
        if len(sim) == 1 and len(gold_items) == 1:  # one item each: the one assignment, without scipy's set-up
            pairs: Any = ((0, 0),)
        else:
            rows, cols = linear_sum_assignment(np.array(sim), maximize=True)
            pairs = zip(rows.tolist(), cols.tolist(), strict=True)
        threshold = self.cfg.match_threshold
        matched = [(r, c) for r, c in pairs if sim[r][c] >= threshold]
        parts = {
            "coverage": len(matched) / len(gold_items),
            "quality": mean([sim[r][c] for r, c in matched]) if matched else 0.0,
            "diversity": self._diversity(pred_items, session),
        }
        if edges(gold):
            step_map: dict[int, int] = {}
            for r, c in matched:
                step_map.setdefault(gold_items[c].step, pred_items[r].step)
            parts["dependency"] = self._dependency(plan, gold, step_map)
        weights = self.weights
        total = sum(weights[k] for k in parts)
        if total <= 0:  # e.g. only the dependency weight is set and the gold has no edges
            return parts["coverage"]
        return min(max(sum(weights[k] * parts[k] for k in parts) / total, 0.0), 1.0)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        rows = self.rows(columns)
        plans = read_plans(completions, self.schema)
        texts = [t for p in (*plans, *rows.golds) if p is not None for s in p.steps or () for t in s.tasks]
        session = self.backend.session(texts)
        # A prompt's rollouts often plan alike, if not in the same words of rewrite (the one field not read here).
        return rows.score_plans(plans, lambda plan, gold, index: self.coverage(plan, gold, index, session))
