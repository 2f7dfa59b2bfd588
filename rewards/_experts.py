"""Map free-form expert names onto a row's expert list, and the one setting that rule has.

The ``expert_match:`` section (:class:`ExpertMatchConfig`) is declared here, not in ``expert_match.py``, because
more than ExpertMatch reads it: PlanCoverage resolves the experts of its items with the same threshold, and every
planning reward checks its rows' gold experts with it (``PlanningReward.golds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from rewardkit.rewards._config import config_section, setting
from rewardkit.rewards._parsing import GoldError
from rewardkit.rewards._text import normalize_name


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


class ExpertIndex:
    """Resolve names to entries of one row's ``experts`` list.

    Exact match after NFKC, whitespace/zero-width removal and casefolding;
    otherwise the best rapidfuzz ``ratio`` at or above ``threshold`` (0-100).
    """

    def __init__(self, experts: Sequence[str], threshold: float) -> None:
        self.experts = list(experts)
        self.threshold = threshold
        self._norm = [normalize_name(e) for e in self.experts]
        self._exact = {n: e for n, e in zip(self._norm, self.experts, strict=True)}

    def resolve(self, name: str) -> str | None:
        """The canonical list entry for ``name``, or None if it is not in the list."""
        norm = normalize_name(name)
        if norm in self._exact:
            return self._exact[norm]
        if not norm or not self._norm:
            return None
        best = process.extractOne(norm, self._norm, scorer=fuzz.ratio, score_cutoff=self.threshold)
        return None if best is None else self.experts[best[2]]

    def resolve_gold(self, name: str) -> str:
        found = self.resolve(name)
        if found is None:
            raise GoldError(
                f"gold expert {name!r} is not in the row's 'experts' list {self.experts}; "
                "fix the row's solution or experts column"
            )
        return found
