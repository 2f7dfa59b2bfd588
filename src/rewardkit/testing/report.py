"""What :func:`rewardkit.testing.check_reward` returns: one :class:`Check` per rule, gathered in a :class:`Report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def safe_text(text: str) -> str:
    """``text`` with what cannot be written as UTF-8 (lone surrogates) escaped, so that any message prints and
    any report writes as JSON."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class Check:
    """One rule of the contract: its stable name (``shape``, ``hostile:empty``, ``gaming:repeated`` …), whether the
    reward kept it, and what was seen (for a failure: the smallest input found that breaks it)."""

    name: str
    passed: bool
    detail: str = ""

    def __post_init__(self) -> None:  # a reward's own exception text may hold lone surrogates
        object.__setattr__(self, "detail", safe_text(str(self.detail)))


@dataclass
class Report:
    """Every check run on one reward, in the order they ran."""

    checks: list[Check] = field(default_factory=list)
    reward: str = ""  # the reward's name, for messages
    skipped: list[str] = field(default_factory=list)  # the checks left out with ``skip``

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
            "reward": safe_text(self.reward),
            "passed": self.passed,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
            "skipped": list(self.skipped),
        }

    def summary(self) -> str:
        """One line per failed check (``name: detail``) under a header; a single line when all passed."""
        bad = self.failed()
        who = safe_text(self.reward) or "the reward"
        left = f" ({len(self.skipped)} skipped: {', '.join(self.skipped)})" if self.skipped else ""
        if not bad:
            return f"reward contract for {who}: all {len(self.checks)} checks passed{left}"
        head = f"reward contract for {who}: {len(bad)} of {len(self.checks)} checks failed{left}"
        return "\n".join([head, *(f"  {c.name}: {c.detail}" for c in bad)])

    def raise_for_failures(self) -> None:
        """Raise AssertionError naming each failed check and its detail (what a pytest test wants)."""
        if not self.passed:
            raise AssertionError(self.summary())
