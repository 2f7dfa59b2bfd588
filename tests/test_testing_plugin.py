"""The pytest plugin: a user's ten-line test of their own reward, run by a real pytest session (pytester)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TEST = """
import pytest

def text(c):  # a string, or TRL's conversational [{"role": "assistant", "content": ...}]
    return c if isinstance(c, str) else c[-1]["content"]

def exact(completions, solution, **kwargs):
    return [float(text(c) == f"<answer>{s}</answer>") for c, s in zip(completions, solution)]

def rewards_length(completions, solution, **kwargs):
    return [min(1.0, len(text(c)) / 100) for c in completions]

ROWS = [{"solution": "42", "completion": "<answer>42</answer>"}]

def test_good(reward_contract):
    reward_contract(exact, rows=ROWS)

def test_gameable(reward_contract):
    reward_contract(rewards_length, rows=ROWS)

@pytest.mark.reward_contract(checks=["values"], range=(0.0, 0.1))
def test_marker_options(reward_contract):
    reward_contract(exact, rows=ROWS)
"""


def test_a_users_test_passes_for_a_good_reward_and_names_the_check_for_a_bad_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user_reward=USER_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    # rewards_length: the gold (19 chars) scores 0.19; the 16 384-char max_length probe scores min(1, 163.84) = 1.
    for line in (
        "reward contract for rewards_length: 3 of 25 checks failed",
        "  gaming:max_length: row 0: scores 1, its gold 0.19 (needs <= 0.09, margin 0.1)",
        "  values: value 0 is 1.0, outside the declared range [0.0, 0.1]",  # the marker's range and checks
        "FAILED test_user_reward.py::test_gameable",
        "FAILED test_user_reward.py::test_marker_options",
    ):
        assert line in out, out
    assert "FAILED test_user_reward.py::test_good" not in out


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.reward_contract(**options)*"])
