"""What :func:`rewardkit.testing.check_reward` returns: one :class:`Check` per rule, gathered in a :class:`Report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    """One rule of the contract: its stable name (``shape``, ``hostile:empty``, ``gaming:repeated`` …), whether the
    reward kept it, and what was seen (for a failure: the smallest input found that breaks it)."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class Report:
    """Every check run on one reward, in the order they ran."""

    checks: list[Check] = field(default_factory=list)
    reward: str = ""  # the reward's name, for messages

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def get(self, name: str) -> Check:
        """The check called ``name`` (KeyError when it did not run)."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "passed": self.passed,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
        }

    def summary(self) -> str:
        """One line per failed check (``name: detail``) under a header; a single line when all passed."""
        bad = self.failed()
        head = f"reward contract for {self.reward or 'the reward'}: {len(bad)} of {len(self.checks)} checks failed"
        if not bad:
            return f"reward contract for {self.reward or 'the reward'}: all {len(self.checks)} checks passed"
        return "\n".join([head, *(f"  {c.name}: {c.detail}" for c in bad)])

    def raise_for_failures(self) -> None:
        """Raise AssertionError naming each failed check and its detail (what a pytest test wants)."""
        if not self.passed:
            raise AssertionError(self.summary())
