"""Property tests: any string a model can emit gets a finite score in range."""

from __future__ import annotations

import json
import math
import random

import pytest
from conftest import E5, GOLD, THINK, answer, completion, step
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.rewards import PLANNING_REWARDS
from rewardkit.rewards.strict_format import REFERENCE_PATTERN, matches_strict_format

REWARD_OBJECTS = {key: cls() for key, cls in PLANNING_REWARDS.items()}

FRAGMENTS = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "\n",
    "\n\n",
    " ",
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    '"plan"',
    '"补全后的问题"',
    '"专家"',
    '"处理问题"',
    '"depends_on"',
    "数据分析专家",
    "\x00",
    "\ud800",
    "\udfff",
    "ＡＢＣ",
    "\u200b",
    "null",
    "0",
    "-1",
    "1e999",
]

any_char_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=300)  # includes lone surrogates
fragment_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=40).map("".join)
plan_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["plan", "专家", "处理问题", "x"]), inner)
    ),
    max_leaves=20,
).map(lambda v: completion(THINK, json.dumps(v, ensure_ascii=False)))
completions = any_char_text | fragment_text | plan_json


def assert_in_range(key: str, scores: list[float | None], n: int) -> None:
    assert len(scores) == n, key
    for s in scores:
        assert s is not None, key  # every row has gold here, so no reward may abstain
        assert math.isfinite(s) and 0.0 <= s <= 1.0, (key, s)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(completions, min_size=1, max_size=6))
def test_every_reward_is_finite_and_in_range(texts: list[str]) -> None:
    for key, reward in REWARD_OBJECTS.items():
        assert_in_range(key, reward(texts, solution=[GOLD] * len(texts), experts=[E5] * len(texts)), len(texts))


@settings(max_examples=500, deadline=None)
@given(fragment_text)
def test_linear_strict_format_equals_the_reference_regex(text: str) -> None:
    assert matches_strict_format(text) == (REFERENCE_PATTERN.match(text) is not None)


def _big_inputs() -> dict[str, str]:
    rng = random.Random(0)
    mb = 1 << 20
    noise = "".join(chr(rng.randrange(1, 0xFFFF)) for _ in range(mb // 4))
    plan = answer("查看经营周报", step("数据分析专家", "查看经营周报"))
    return {
        "1MB random code points": noise * 4,
        "1MB of repeated separators": "<think>\n" + "\n</think>\n\n<answer>\n" * (mb // 20),
        "1MB think then valid answer": completion("思考" * (mb // 2), plan),
        "1MB think of one repeated JSON key": completion('"plan"' + " " * mb + ":", plan),
        "deeply nested JSON answer": completion(THINK, "[" * 200_000 + "]" * 200_000),
        "deeply nested plan field": completion(THINK, '{"补全后的问题": "q", "plan": ' + "[" * 5000 + "]" * 5000 + "}"),
        "NUL bytes everywhere": completion("\x00" * 1000, '{"补全后的问题": "\\u0000", "plan": []}'),
        "lone surrogates in answer": completion(
            THINK, '{"补全后的问题": "\\ud800", "plan": [{"专家": "\udfff", "处理问题": ["\\udc00"]}]}'
        ),
        "1MB rewrite": completion(THINK, answer("周报" * (mb // 2), step("数据分析专家", "周报" * 1000))),
        "many answer blocks": "<think>\nx\n</think>\n\n" + "<answer>\n{}\n</answer>\n" * 50_000,
    }


BIG = _big_inputs()


@pytest.mark.parametrize("name", list(BIG))
def test_hostile_inputs_score_in_range(name: str) -> None:
    # A quadratic regex or an exception on any of these would hang or fail here.
    text = BIG[name]
    for key, reward in REWARD_OBJECTS.items():
        assert_in_range(key, reward([text], solution=[GOLD], experts=[E5]), 1)
