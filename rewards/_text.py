"""Text normalisation, content units, and expert names mapped onto a row's list, shared by the rewards.

Chinese has no spaces, so "words" alone would make one unit of a whole
sentence. Content units are therefore lower-cased Latin/digit words plus CJK
characters (or CJK bigrams, which carry more meaning than single characters).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from typing import Literal

from rapidfuzz import fuzz, process

CjkUnit = Literal["char", "bigram"]

# Zero-width characters models and annotators paste into names by accident.
_INVISIBLE = re.compile("[\\s\u200b\u200c\u200d\u2060\ufeff\u00ad]+")
# CJK Unified Ideographs (+ extension A, compatibility), Hiragana/Katakana, Hangul.
_CJK_BLOCKS = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF))
_CJK_RANGES = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_BLOCKS)


def _word_ranges(blocks: tuple[tuple[int, int], ...]) -> str:
    """The letters and digits of ``blocks`` (what ``[^\\W_]`` matches there) as a character class's ranges."""
    ranges: list[list[int]] = []
    for code in (c for lo, hi in blocks for c in range(lo, hi + 1) if chr(c).isalnum()):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges)


# Words are runs of letters and digits ([^\W_]). A word that mixes scripts ("gmv增长") splits into its runs of
# non-CJK letters and digits (_LATIN) and its CJK ones (the blocks also hold marks and punctuation: U+3099, U+30FB).
_LATIN = f"[^\\W_{_CJK_RANGES}]+"
_CJK_WORD_CHAR = f"[{_word_ranges(_CJK_BLOCKS)}]"
_UNIT = re.compile(f"{_LATIN}|{_CJK_WORD_CHAR}")  # the n-gram units: a non-CJK run, or one CJK character
_RUN = re.compile(f"({_LATIN})|({_CJK_WORD_CHAR}+)")  # group 1 a non-CJK run, group 2 a CJK run


# Fullwidth ASCII and the ideographic space, as NFKC maps them (U+FF01-U+FF5E -> U+0021-U+007E, U+3000 -> space);
# the punctuation of Chinese prose first, replaced one by one (cheaper than a translate of the whole text).
_FULLWIDTH = {0x3000: " ", **{cp: chr(cp - 0xFEE0) for cp in range(0xFF01, 0xFF5F)}}
_COMMON_FULLWIDTH = tuple((c, chr(ord(c) - 0xFEE0)) for c in "，？：；！（）")


def nfkc(text: str) -> str:
    """NFKC-normalise, folding fullwidth ASCII (Ａ→A, ＊→*) into plain forms."""
    # Normalising costs far more than checking, and Chinese prose is NFKC as written but for its fullwidth
    # punctuation. Mapping a fullwidth form to its decomposition changes no character's full decomposition, so when
    # the mapped text passes the check it is the NFKC of the original.
    if unicodedata.is_normalized("NFKC", text):
        return text
    mapped = text
    for wide, narrow in _COMMON_FULLWIDTH:
        mapped = mapped.replace(wide, narrow)
    if unicodedata.is_normalized("NFKC", mapped):
        return mapped
    mapped = mapped.translate(_FULLWIDTH)
    return mapped if unicodedata.is_normalized("NFKC", mapped) else unicodedata.normalize("NFKC", text)


def fold(text: str) -> str:
    """NFKC and casefolded: what every case-insensitive comparison of the rewards reads."""
    return nfkc(text).casefold()


def normalize_name(name: str) -> str:
    """Canonical form of an expert name: NFKC, no whitespace/zero-width, casefolded."""
    return _INVISIBLE.sub("", nfkc(name)).casefold()


def normalize_text(text: str) -> str:
    """Canonical form for lexical similarity: NFKC, casefolded, whitespace collapsed."""
    return " ".join(_INVISIBLE.split(fold(text))).strip()


def content_units(text: str, cjk: CjkUnit = "bigram") -> set[str]:
    """Set of content units: Latin/digit words and CJK characters or bigrams."""
    units: set[str] = set()
    for latin, run in _RUN.findall(fold(text)):
        if latin:
            units.add(latin)
        elif cjk == "char" or len(run) == 1:
            units.update(run)
        else:
            units.update(run[i : i + 2] for i in range(len(run) - 1))
    return units


def unit_sequence(text: str) -> list[str]:
    """Ordered units (words and single CJK characters), for n-gram statistics."""
    return _UNIT.findall(fold(text))


_RESOLVED_MAX = 4096  # names remembered per index: a model that invents a new name each time cannot grow it further


class ExpertIndex:
    """Resolve names to entries of one row's ``experts`` list (the ``expert_match`` rule).

    Its one setting is the ``expert_match:`` section (:class:`ExpertMatchConfig` in ``rewards/config.py``), read by
    ExpertMatch, by PlanCoverage for its items' experts, and by every planning gold check (``PlanningReward.golds``).

    Exact match after NFKC, whitespace/zero-width removal and casefolding;
    otherwise the best rapidfuzz ``ratio`` at or above ``threshold`` (0-100).
    """

    def __init__(self, experts: Sequence[str], threshold: float) -> None:
        self.experts = list(experts)
        self.threshold = threshold
        self._norm = [normalize_name(e) for e in self.experts]
        self._exact = {n: e for n, e in zip(self._norm, self.experts, strict=True)}
        self._resolved: dict[str, str | None] = {}  # name -> resolve(name), for the names a run keeps writing

    def resolve(self, name: str) -> str | None:
        """The canonical list entry for ``name``, or None if it is not in the list."""
        if name in self._resolved:
            return self._resolved[name]
        found = self._resolve(name)
        if len(self._resolved) < _RESOLVED_MAX:
            self._resolved[name] = found
        return found

    def _resolve(self, name: str) -> str | None:
        norm = normalize_name(name)
        if norm in self._exact:
            return self._exact[norm]
        if not norm or not self._norm:
            return None
        best = process.extractOne(norm, self._norm, scorer=fuzz.ratio, score_cutoff=self.threshold)
        return None if best is None else self.experts[best[2]]


@functools.lru_cache(maxsize=256)
def expert_index(experts: tuple[str, ...], threshold: float) -> ExpertIndex:
    """The index of one ``experts`` list, built once per process: a dataset's rows share a handful of lists."""
    return ExpertIndex(experts, threshold)
