"""The pytest plugin: a user's ten-line test of their own reward, run by a real pytest session (pytester)."""

from __future__ import annotations

import re
from pathlib import Path

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
        "reward contract for rewards_length: 3 of 26 checks failed",
        "  gaming:max_length: row 0: scores 1, its gold 0.19 (needs <= 0.09, margin 0.1)",
        "  values: value 0 is 1.0, outside the declared range [0.0, 0.1]",  # the marker's range and checks
        "FAILED test_user_reward.py::test_gameable",
        "FAILED test_user_reward.py::test_marker_options",
    ):
        assert line in out, out
    assert "FAILED test_user_reward.py::test_good" not in out


# The module's marker sets checks and a range exact's 1.0 falls outside; a class marker and a test's own marker
# override it, the closest one winning key by key (checks stays the module's).
MARKED_TEST = """
import pytest

pytestmark = pytest.mark.reward_contract(checks=["values"], range=(0.0, 0.1))

def exact(completions, solution, **kwargs):
    return [float(c == f"<answer>{s}</answer>") for c, s in zip(completions, solution)]

ROWS = [{"solution": "42", "completion": "<answer>42</answer>"}]

def test_module_marker(reward_contract):
    reward_contract(exact, rows=ROWS)

@pytest.mark.reward_contract(range=(0.0, 1.0))
def test_own_marker_over_module(reward_contract):
    reward_contract(exact, rows=ROWS)

@pytest.mark.reward_contract(range=(0.0, 1.0))
class TestClassMarker:
    def test_class_over_module(self, reward_contract):
        reward_contract(exact, rows=ROWS)

    @pytest.mark.reward_contract(range=(0.0, 0.5))
    def test_own_marker_over_class(self, reward_contract):
        report = reward_contract(exact, rows=ROWS, range=(0.0, 2.0))
        assert [c.name for c in report.checks] == ["values"]
        assert report.checks[0].detail == "finite, in [0.0, 2.0], None allowed"

    @pytest.mark.reward_contract(range=(0.0, 0.5))
    def test_own_marker_over_class_fails(self, reward_contract):
        reward_contract(exact, rows=ROWS)
"""


def test_the_closest_marker_wins(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_marked=MARKED_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    for line in (
        "PASSED test_marked.py::test_own_marker_over_module",
        "PASSED test_marked.py::TestClassMarker::test_class_over_module",
        "PASSED test_marked.py::TestClassMarker::test_own_marker_over_class",  # the call's own range: [0, 2]
        "  values: value 0 is 1.0, outside the declared range [0.0, 0.1]",  # the module's, where nothing is closer
        "  values: value 0 is 1.0, outside the declared range [0.0, 0.5]",  # the test's, over its class's [0, 1]
        "FAILED test_marked.py::test_module_marker",
        "FAILED test_marked.py::TestClassMarker::test_own_marker_over_class_fails",
    ):
        assert line in out, out


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.reward_contract(**options)*"])


SKIP_TEST = """
import pytest

def swift_only(completions, solution, **kwargs):  # ms-swift passes strings only: no TRL message lists
    return [float(c == f"<answer>{s}</answer>") for c, s in zip(completions, solution)]

ROWS = [{"solution": "42", "completion": "<answer>42</answer>"}, {"solution": "7", "completion": "<answer>7</answer>"}]

def test_without_skip(reward_contract):
    reward_contract(swift_only, rows=ROWS)

@pytest.mark.reward_contract(skip=["conversational"])
def test_marker_skip(reward_contract):
    report = reward_contract(swift_only, rows=ROWS)
    assert report.skipped == ["conversational"]
"""


def test_skip_in_the_marker_leaves_a_check_out(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_skip=SKIP_TEST)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-rA")
    # Without skip, a message list never equals "<answer>42</answer>": the conversational check fails; with the
    # marker's skip it passes.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*conversational: row 0 * scored 0.0 instead of 1.0*", "PASSED test_skip.py::test_marker_skip"]
    )


# The README's example, its reward and its test as the page shows them, and reward()'s class of the same function:
# both keep the whole contract (`**kwargs` is no column; TRL's message lists are read; no probe scores the gold).
README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
README_EXAMPLE = re.compile(r"```python\n(def my_reward\(completions, solution, \*\*kwargs\):.*?)```", re.S)
README_TEST = README_EXAMPLE.search(README).group(1)
README_MODULE = f"""
from rewardkit.rewards import reward

{README_TEST}

MyReward = reward(my_reward)


def test_my_reward_class(reward_contract):
    reward_contract(MyReward(), rows=[{{"solution": "42", "completion": "<answer>42</answer>"}}])
"""


def test_the_readmes_example_keeps_the_contract(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_readme=README_MODULE)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "PASSED test_readme.py::test_my_reward",
            "PASSED test_readme.py::test_my_reward_class",
        ]
    )
