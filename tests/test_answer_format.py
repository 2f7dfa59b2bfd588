from __future__ import annotations

import pytest
from conftest import GOOD
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.rewards import AnswerFormat
from rewardkit.rewards.answer_format import ANSWER_ONLY_PATTERN, matches_answer_only

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. only row 4 is an answer without a think block.
CONTRACT = [0.0, 0.0, 0.0, 0.0, 1.0]

CASES = [
    ('<answer>\n{"plan": []}\n</answer>', 1.0, "answer only"),
    ('<answer>\n{"plan": []}\n</answer>\n', 1.0, "$ allows one final newline"),
    ("<answer>\n\n</answer>", 1.0, "empty body"),
    ("<answer>\n</answer>", 0.0, "the two newlines cannot be shared"),
    (GOOD, 0.0, "a think block is not answer-only"),
    (" <answer>\n{}\n</answer>", 0.0, "leading space"),
    ("<answer>\n{}\n</answer>\n\n", 0.0, "two trailing newlines"),
]


class TestAnswerFormat:
    @pytest.mark.parametrize(("text", "expected", "why"), CASES, ids=[c[2] for c in CASES])
    def test_table(self, text: str, expected: float, why: str) -> None:
        assert AnswerFormat()([text]) == [expected]
        assert (ANSWER_ONLY_PATTERN.match(text) is not None) == (expected == 1.0)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(["<answer>", "</answer>", "\n", "x", " "]), max_size=12).map("".join))
    def test_equals_the_regex(self, text: str) -> None:
        assert matches_answer_only(text) == (ANSWER_ONLY_PATTERN.match(text) is not None)
