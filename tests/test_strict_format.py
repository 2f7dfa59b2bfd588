from __future__ import annotations

import pytest
from conftest import GOOD

from rewardkit.rewards import StrictFormat
from rewardkit.rewards.strict_format import REFERENCE_PATTERN, matches_strict_format

# Its scores on the contract batch of test_reward_contract.py (COMPLETIONS x CELLS), pinned: no score may
# change. rows 0-1 in the planner's layout; 2-4 are not (no close, empty, no think).
CONTRACT = [1.0, 1.0, 0.0, 0.0, 0.0]

CASES = [
    # (completion, expected, why)
    (GOOD, 1.0, "the planner's layout"),
    (GOOD + "\n", 1.0, "$ also matches before one final newline"),
    (GOOD + "\n\n", 0.0, "two trailing newlines: $ cannot skip both"),
    (" " + GOOD, 0.0, "re.match anchors at 0: no leading space"),
    ("<think>\nx\n</think>\n<answer>\ny\n</answer>", 0.0, "one newline between blocks instead of two"),
    ("<think>\n\n</think>\n\n<answer>\n\n</answer>", 1.0, "both .*? may be empty"),
    ("<think>\nx\n</think>\n\n<answer>\ny\n</answer>", 1.0, "minimal non-empty"),
    ("<think>\r\nx\r\n</think>\r\n\r\n<answer>\r\ny\r\n</answer>", 0.0, "CRLF is not \\n"),
    ("<think>\nx\n</think>\n\n<answer>\ny</answer>", 0.0, "answer body must end with \\n"),
    ("<think>\nx\n</think>\n\n<answer>\ny\n</answer>\n<answer>\nz\n</answer>", 1.0, "DOTALL .*? swallows a 2nd block"),
    ("<think>\n</think>\n\n<answer>\n</answer>", 0.0, "too short: prefix and separator overlap"),
    ("", 0.0, "empty"),
]


class TestStrictFormat:
    @pytest.mark.parametrize(("text", "expected", "why"), CASES, ids=[c[2] for c in CASES])
    def test_table(self, text: str, expected: float, why: str) -> None:
        assert StrictFormat()([text]) == [expected]
        # The linear-time check agrees with the planner's regex on every case.
        assert (REFERENCE_PATTERN.match(text) is not None) == (expected == 1.0)

    def test_thousands_of_blocks_stay_linear(self) -> None:
        # 20k "\n</think>\n\n<answer>\n" separators with no closing tag: the reference
        # regex tries every split (quadratic); the linear check answers at once.
        text = "<think>\n" + "\n</think>\n\n<answer>\n" * 20_000 + "x"
        assert matches_strict_format(text) is False
        assert matches_strict_format(text + "\n</answer>") is True
