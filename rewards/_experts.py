"""Map free-form expert names onto a row's expert list.

The rule's one setting is the ``expert_match:`` section (:class:`ExpertMatchConfig` in ``rewards/config.py``).
More than ExpertMatch reads it: PlanCoverage resolves the experts of its items with the same threshold, and every
planning reward checks its rows' gold experts with it (``PlanningReward.golds``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz import fuzz, process

from rewardkit.rewards._text import normalize_name


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
