"""The reward stack's fast paths give exactly what the plain computation gives (benchmarks/bench_reward_stack.py).

Each fast path is checked against a reference written the plain way: the library call it avoids, or the former
implementation kept here as the oracle. Equality is exact (``==`` on floats), because no score may move.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

import numpy as np
import pytest
from conftest import E5, GOLD, THINK, answer, completion, step
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz, process

from rewardkit.rewards import PLANNING_REWARDS
from rewardkit.rewards._parsing import COMPLETIONS, answer_plan, parse
from rewardkit.rewards._similarity import LexicalBackend
from rewardkit.rewards._text import content_units, nfkc, normalize_text, unit_sequence
from rewardkit.rewards.plan_coverage import mean
from rewardkit.rewards.think_quality import distinct_ngram_ratio

# Characters where the fast paths branch: fullwidth forms and the ideographic space (the NFKC shortcut), the CJK
# ranges and their non-word members (U+30FB, U+3099: the unit scan), combining marks that compose with a mapped
# fullwidth letter, compatibility ideographs, digits and underscores inside words.
ALPHABET = "aZ09_ -,.Ａｚ０，？：；！（）\u3000\u0301\u0308…。、数据分析专家周报\u30fb\u3099かカ한\uf900\ufa10ﬁ①"
texts = st.text(alphabet=ALPHABET, max_size=40) | st.text(max_size=40)


# --- the former implementations, the oracles ----------------------------------------------------------------------
_CJK_CLASS = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"


def _runs(text: str) -> Iterator[tuple[str, bool]]:
    for word in re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", text).casefold()):
        for run in re.split(f"({_CJK_CLASS}+)", word):
            if run:
                yield run, bool(re.match(_CJK_CLASS, run))


def reference_units(text: str, cjk: str) -> set[str]:
    units: set[str] = set()
    for run, is_cjk in _runs(text):
        if not is_cjk:
            units.add(run)
        elif cjk == "char" or len(run) == 1:
            units.update(run)
        else:
            units.update(run[i : i + 2] for i in range(len(run) - 1))
    return units


def reference_sequence(text: str) -> list[str]:
    return [u for run, is_cjk in _runs(text) for u in (run if is_cjk else [run])]


@settings(max_examples=400, deadline=None)
@given(texts)
def test_nfkc_is_unicodedata_nfkc(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_units_are_the_former_scan(text: str) -> None:
    assert unit_sequence(text) == reference_sequence(text)
    assert content_units(text, "bigram") == reference_units(text, "bigram")
    assert content_units(text, "char") == reference_units(text, "char")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("ab数据"), max_size=30), st.integers(1, 4))
def test_distinct_ngrams_are_the_tuple_set(units: list[str], n: int) -> None:
    total = len(units) - n + 1
    expected = 1.0 if total <= 0 else len({tuple(units[i : i + n]) for i in range(total)}) / total
    assert distinct_ngram_ratio(units, n) == expected


@pytest.mark.parametrize("size", [1, 2, 7, 8, 9, 31])  # below 8 values the sum, from 8 on numpy itself
def test_mean_is_numpy_mean(size: int) -> None:
    values = list(np.random.default_rng(size).random(size) * [1e-3, 1.0, 1e3][size % 3])
    assert mean(values) == float(np.mean(values))


@settings(max_examples=100, deadline=None)
@given(st.lists(texts, min_size=1, max_size=9), st.lists(texts, min_size=1, max_size=9))
def test_lexical_session_is_cdist(a: list[str], b: list[str]) -> None:
    # 1..81 pairs: both sides of the 64-pair switch between one fuzz.ratio a pair and one cdist call
    expected = (
        process.cdist(
            [normalize_text(x) for x in a], [normalize_text(x) for x in b], scorer=fuzz.ratio, dtype=np.float32
        ).astype(np.float64)
        / 100.0
    )
    session = LexicalBackend().session(a[:1])  # one text known to the session, the others normalised on demand
    assert (np.array(session.matrix(a, b)) == expected).all()
    k = min(len(a), len(b))
    assert (session.pairwise(a[:k], b[:k]) == np.diag(expected)[:k]).all()


def test_each_distinct_answer_is_validated_once() -> None:
    # 8 completions, 3 distinct answers: 8 splits, 3 schema validations, whatever the seven rewards read
    answers = [
        answer("查看经营周报", step("数据分析专家", "查看经营周报")),
        answer("看周报", step("数据分析专家", "看周报")),
    ]
    batch = [completion(THINK + f" 第{i}条", answers[i % 2] if i < 6 else "{}") for i in range(8)]
    COMPLETIONS.clear()
    parse.cache_clear()
    answer_plan.cache_clear()
    for cls in PLANNING_REWARDS.values():
        cls()(batch, solution=[GOLD] * 8, experts=[E5] * 8)
    assert parse.cache_info().misses == 8
    assert answer_plan.cache_info().misses == 3


@pytest.mark.parametrize("rewrites", [False, True])
def test_rollouts_that_answer_alike_score_as_each_alone(rewrites: bool) -> None:
    # The per-batch dedupe of ExpertMatch, PlanCoverage and RewriteSimilarity: a batch with repeated plans (rows 0,
    # 2, 4 alike; 1 and 3 alike), written with one rewrite each or each with a rewrite of its own (ExpertMatch and
    # PlanCoverage score a plan's steps once, whatever its rewrite), scores each row as a batch of it alone does.
    tasks = [("数据分析专家", "查看经营周报"), ("策略推荐专家", "看周报")]
    rewrite = [f"查看经营周报（{i}）" if rewrites else "查看经营周报" for i in range(5)]
    batch = [completion(THINK + f" 第{i}条", answer(rewrite[i], step(*tasks[i % 2]))) for i in range(5)]
    for key, cls in PLANNING_REWARDS.items():
        reward = cls()
        together = reward(batch, solution=[GOLD] * 5, experts=[E5] * 5)
        alone = [reward([c], solution=[GOLD], experts=[E5])[0] for c in batch]
        assert together == alone, key
