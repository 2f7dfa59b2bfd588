"""Text normalisation, content units, and expert names mapped onto a row's list, shared by the rewards.

Chinese has no spaces, so "words" alone would make one unit of a whole
sentence. Content units are therefore lower-cased Latin/digit words plus CJK
characters (or CJK bigrams, which carry more meaning than single characters).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import Literal

from rapidfuzz import fuzz, process

CjkUnit = Literal["char", "bigram"]

# Zero-width characters models and annotators paste into names by accident.
_INVISIBLE = re.compile("[\\s\u200b\u200c\u200d\u2060\ufeff\u00ad]+")
_WORD = re.compile(r"[^\W_]+")
# CJK Unified Ideographs (+ extension A, compatibility), Hiragana/Katakana, Hangul.
_CJK_CLASS = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_CJK = re.compile(_CJK_CLASS)
_CJK_RUN = re.compile(f"({_CJK_CLASS}+)")


def nfkc(text: str) -> str:
    """NFKC-normalise, folding fullwidth ASCII (Ａ→A, ＊→*) into plain forms."""
    return unicodedata.normalize("NFKC", text)


def normalize_name(name: str) -> str:
    """Canonical form of an expert name: NFKC, no whitespace/zero-width, casefolded."""
    return _INVISIBLE.sub("", nfkc(name)).casefold()


def normalize_text(text: str) -> str:
    """Canonical form for lexical similarity: NFKC, casefolded, whitespace collapsed."""
    return " ".join(_INVISIBLE.split(nfkc(text).casefold())).strip()


def _runs(text: str) -> Iterator[tuple[str, bool]]:
    """Yield (run, is_cjk) for each word of ``text``, splitting mixed-script words."""
    for word in _WORD.findall(nfkc(text).casefold()):
        # A \w run may mix scripts ("gmv增长"); split it into CJK runs and the rest.
        for run in _CJK_RUN.split(word):
            if run:
                yield run, bool(_CJK.match(run))


def content_units(text: str, cjk: CjkUnit = "bigram") -> set[str]:
    """Set of content units: Latin/digit words and CJK characters or bigrams."""
    units: set[str] = set()
    for run, is_cjk in _runs(text):
        if not is_cjk:
            units.add(run)
        elif cjk == "char" or len(run) == 1:
            units.update(run)
        else:
            units.update(run[i : i + 2] for i in range(len(run) - 1))
    return units


def unit_sequence(text: str) -> list[str]:
    """Ordered units (words and single CJK characters), for n-gram statistics."""
    seq: list[str] = []
    for run, is_cjk in _runs(text):
        if is_cjk:
            seq.extend(run)
        else:
            seq.append(run)
    return seq


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

    def resolve(self, name: str) -> str | None:
        """The canonical list entry for ``name``, or None if it is not in the list."""
        norm = normalize_name(name)
        if norm in self._exact:
            return self._exact[norm]
        if not norm or not self._norm:
            return None
        best = process.extractOne(norm, self._norm, scorer=fuzz.ratio, score_cutoff=self.threshold)
        return None if best is None else self.experts[best[2]]
