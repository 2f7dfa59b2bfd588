"""ExpertMatch: did the plan pick the right experts from the row's list?"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rewardkit.rewards._base import PlanningReward, known_gaps
from rewardkit.rewards._parsing import Plan, read_plans
from rewardkit.rewards._text import ExpertIndex
from rewardkit.rewards.config import ExpertMatchConfig


def set_f1(pred: set[str], gold: set[str]) -> float:
    """``2|P∩G| / (|P| + |G|)``; two empty sets agree perfectly."""
    if not pred and not gold:
        return 1.0
    return 2 * len(pred & gold) / (len(pred) + len(gold))


class ExpertMatch(PlanningReward):
    r"""Set F1 between predicted and gold experts, judged against the row's list.

    Formula: predicted names are resolved to the row's ``experts`` (NFKC,
    whitespace/zero-width removed, casefolded, then rapidfuzz ratio >=
    ``expert_match.fuzzy_threshold``: :class:`ExpertMatchConfig` in ``rewards/config.py``, shared with
    PlanCoverage). If any predicted name resolves to
    nothing (a hallucinated expert) the reward is 0.0; otherwise
    ``2|P∩G| / (|P|+|G|)`` over the sets (duplicates collapse; both empty = 1.0).
    0.0 when the answer is not schema-valid JSON.
    Columns: ``solution``, ``experts``. Range: [0, 1].
    None when the gold has no plan.

    Example::

        >>> from rewardkit.rewards import ExpertMatch
        >>> def done(*experts):
        ...     steps = ", ".join('{"专家": "%s", "处理问题": ["查看经营周报"]}' % e for e in experts)
        ...     answer = '{"补全后的问题": "查看经营周报", "plan": [%s]}' % steps
        ...     return f"<think>\n选择专家。\n</think>\n\n<answer>\n{answer}\n</answer>"
        >>> gold = '{"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]}'
        >>> completions = [done("数据分析专家"), done("数据分析专家", "策略推荐专家"), done("外星专家")]
        >>> scores = ExpertMatch()(completions, solution=[gold] * 3, experts=[["数据分析专家", "策略推荐专家"]] * 3)
        >>> [round(s, 3) for s in scores]  # exact; one extra expert: 2*1/(2+1); a name not in the list
        [1.0, 0.667, 0.0]
    """

    section = ExpertMatchConfig  # shared with PlanCoverage and the gold checks (rewards/config.py)
    order = 60
    sets = MappingProxyType({"planner": 0.3, "planner_no_think": 0.3})

    columns = ("solution", "experts")
    gameable = known_gaps(
        "it compares the set of experts, not who takes which step; PlanCoverage scores the assignment",
        "exchanged_experts",
        also=known_gaps("it scores the experts, not the rewrite; RewriteSimilarity scores that", "unrewritten"),
    )

    def match(self, plan: Plan | None, gold: Plan, index: ExpertIndex) -> float:
        if plan is None or plan.steps is None:
            return 0.0
        predicted = [index.resolve(step.expert) for step in plan.steps]
        if any(p is None for p in predicted):
            return 0.0
        gold_set = {step.expert for step in gold.steps or ()}  # resolved when the row was validated
        return set_f1({p for p in predicted if p is not None}, gold_set)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return self.rows(columns).score_plans(read_plans(completions, self.schema), self.match)
