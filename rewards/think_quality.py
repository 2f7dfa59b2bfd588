"""ThinkQuality: is the think present, clean, answer-free and non-degenerate?"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import ahocorasick

from rewardkit.config import ConfigError, config_section, setting
from rewardkit.rewards._base import CONTENT, THINK_ONLY, PlanningReward, known_gaps
from rewardkit.rewards._parsing import ANSWER_CLOSE, ANSWER_OPEN, parse_all
from rewardkit.rewards._text import fold, unit_sequence


class BannedMatcher:
    """Case-insensitive substring search for many keywords at once.

    Aho-Corasick scans the text once whatever the list size, so thousands of
    banned words cost the same as one (a regex alternation would not).
    """

    def __init__(self, words: Iterable[str]) -> None:
        self.words = sorted({fold(w) for w in words if w.strip()})
        self._automaton: Any = None
        if self.words:
            automaton = ahocorasick.Automaton()
            for word in self.words:
                automaton.add_word(word, word)
            automaton.make_automaton()
            self._automaton = automaton

    def first(self, text: str) -> str | None:
        if self._automaton is None:
            return None
        for _, word in self._automaton.iter(fold(text)):
            return str(word)
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        return (BannedMatcher, (self.words,))


def distinct_ngram_ratio(units: list[str], n: int) -> float:
    """Distinct n-grams / all n-grams; 1.0 when the text has fewer than n units."""
    total = len(units) - n + 1
    if total <= 0:
        return 1.0
    return len(set(zip(*(units[i:] for i in range(n)), strict=False))) / total  # the n-grams, as tuples


def _read_banned(path: Path) -> list[str]:
    where = f"think_quality.banned_file: {path}"
    if not path.is_file():
        raise ConfigError(f"{where} not found; give a UTF-8 file, one word a line")
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start}); save it as UTF-8, one word a line") from exc
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc}); check its permissions") from exc


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


class ThinkQuality(PlanningReward):
    r"""Quality gate on the think text.

    Formula: 0.0 if the think is missing or empty, contains a banned keyword
    (``think_quality.banned`` + ``banned_file``, NFKC + case-insensitive
    substring match), or leaks the answer (an ``<answer>``/``</answer>`` tag or
    a ``"<plan key>":`` / ``"<rewrite key>":`` JSON field). Otherwise
    ``min(1, r / min_distinct_ratio)`` where ``r`` is the distinct
    ``repetition_ngram``-gram ratio over words and CJK characters: ordinary
    prose scores 1.0, a think that loops on one phrase drops towards 0.
    Config: ``think_quality`` (:class:`ThinkQualityConfig`, above).
    Columns: none. Range: [0, 1]. Never returns None.

    Example::

        >>> from rewardkit.rewards import ThinkQuality
        >>> def think(text):
        ...     return f"<think>\n{text}\n</think>\n\n<answer>\n{{}}\n</answer>"
        >>> reward = ThinkQuality(config={"think_quality": {"banned": ["作为AI"]}})
        >>> [round(r, 3) for r in reward([
        ...     think("用户想查看经营周报，这属于数据分析专家，不需要拆解。"),  # clean prose
        ...     think("作为AI，我认为这属于数据分析专家。"),  # a banned keyword
        ...     think('答案是 "plan": [数据分析专家]'),  # the answer leaks into the think
        ...     think("查看周报 " * 20),  # loops on one phrase: distinct 3-gram ratio 0.051 / 0.5
        ... ])]
        [1.0, 0.0, 0.0, 0.103]
    """

    section = ThinkQualityConfig
    order = 40
    sets = MappingProxyType({"planner": 0.1})

    may_return_none = False
    gameable = known_gaps(THINK_ONLY, "truncated", "repeated", "max_length", *CONTENT)

    def __init__(self, args: Any = None, config: Any = None, **kwargs: Any) -> None:
        super().__init__(args, config, **kwargs)
        cfg = self.cfg = self.config.section(ThinkQualityConfig)
        words = list(cfg.banned)
        if cfg.banned_file:
            words += _read_banned(Path(cfg.banned_file))
        self.banned = BannedMatcher(words)
        self.ngram = cfg.repetition_ngram
        self.floor = cfg.min_distinct_ratio
        keys = "|".join(re.escape(k) for k in (self.schema.plan_key, self.schema.rewrite_key))
        self._leak = re.compile(f'"(?:{keys})"\\s*:')

    def quality(self, think: str | None) -> float:
        if not think:
            return 0.0
        if ANSWER_OPEN in think or ANSWER_CLOSE in think or self._leak.search(think):
            return 0.0
        if self.banned.first(think) is not None:
            return 0.0
        ratio = distinct_ngram_ratio(unit_sequence(think), self.ngram)
        return min(1.0, ratio / self.floor)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return [self.quality(c.think) for c in parse_all(completions)]
