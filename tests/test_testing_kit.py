"""rewardkit.testing: the kit passes good rewards and fails each broken one on the check it breaks.

The broken rewards live in ``tests/broken_rewards.py``, each the good ``exact_answer`` with one flaw; the bundled
rewards go through the same kit in ``tests/test_reward_contract.py``. No mocks: every reward here really runs.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

import broken_rewards as broken
import pytest
from test_reward_contract import CELLS

from rewardkit.envs.retail.domain import tasks
from rewardkit.rewards import TaskCompletion
from rewardkit.testing import HOSTILE, Check, Report, check_names, check_reward, declared, probes, score
from rewardkit.testing.hostile import bounded, shrink
from rewardkit.testing.probes import COMPLETION_PROBES, MAX_CHARS

ROWS = broken.ROWS
RETAIL_TASKS = tasks()
FAST = 0.3  # time limit for the toy rewards: each answers in microseconds, the regex bomb never

# name -> (the check it fails, a fragment of that check's detail)
FAILS: dict[str, tuple[str, str]] = {
    "raises_on_empty": (
        "hostile:empty",
        "raised ValueError: empty completion; in row 0, smallest failing input found: ''",
    ),
    "holds_a_lock": ("pickle", "cannot pickle '_thread.lock' object"),
    "wrong_length": ("shape", "returned 4 values for 3 completions"),  # 3 rows + 1
    "returns_nan": ("values", "value 2 is nan"),  # row 2 is the wrong answer
    "out_of_range": ("values", "value 0 is 2.0, outside the declared range [0.0, 1.0]"),  # 2 * 1.0
    "none_not_allowed": ("values", "value 2 is None, and the reward declares it never returns None"),
    "nondeterministic": ("determinism", "scored 0.5 instead of 1.0"),  # the 2nd call halves: 1.0 * 0.5
    "batch_dependent": ("independence", "scores 1.0 alone, 0.5 in the batch"),  # 1 / 2 right answers
    "mutates_inputs": ("no_mutation", "changed column 'solution': row 0 was '42', is now '5'"),  # reversed
    "rejects_extra_columns": ("extra_columns", "unexpected keyword argument"),
    "vague_missing_column": ("missing_column", "without column 'solution' it raised ValueError: bad batch"),
    "thread_unsafe": ("threads", "of 64"),
    "rejects_conversational": ("conversational", "'list' object has no attribute 'strip'"),
    "slow_on_regex_bomb": ("hostile:regex_bomb_letters", f"did not finish within {FAST:g} s"),
    "rewards_length": ("gaming:max_length", "scores 0.5, its gold 0.5095"),  # 0.5*0 + 0.5*1; 0.5 + 0.5*19/1000
}


def test_every_broken_reward_has_a_case_and_every_check_a_broken_reward() -> None:
    assert set(FAILS) == set(broken.BROKEN)
    assert all(FAILS[name][0] == check for name, check in broken.BROKEN.items())
    generic = {n for n in check_names() if ":" not in n and n != "gaming"}
    assert generic <= {check for check, _ in FAILS.values()}, "a generic check without a broken reward"


@pytest.mark.parametrize("reward", [broken.exact_answer, broken.ExactAnswer()], ids=["function", "class"])
def test_a_good_reward_passes_every_check(reward: Any) -> None:
    report = check_reward(reward, ROWS, time_limit_s=FAST)
    assert report.passed, report.summary()
    # 10 generic + 11 hostile + 5 form probes (no prompt_copy: the rows have no prompt) + other_gold and constant
    # (the rows' answers are not plans: no planning near miss)
    assert len(report.checks) == 10 + len(HOSTILE) + 5 + 2
    assert report.get("gaming:tags_only").detail == "at least 1 below the gold on 2 row(s)"  # rows 0 and 1


@pytest.mark.parametrize("name", list(FAILS))
def test_a_broken_reward_fails_naming_its_check(name: str) -> None:
    check, fragment = FAILS[name]
    report = check_reward(getattr(broken, name), ROWS, time_limit_s=FAST)
    failed = {c.name: c.detail for c in report.failed()}
    assert check in failed, report.summary()
    assert fragment in failed[check], failed[check]
    if check.startswith("hostile:"):  # shrunk: (a+)+$ still hangs on far fewer a's than 30 000
        length = int(failed[check].rsplit("(", 1)[1].split(" ")[0])
        assert length < len(HOSTILE[check.removeprefix("hostile:")]) or length == 0, failed[check]
    with pytest.raises(AssertionError, match=rf"(?m)^  {check}: "):
        report.raise_for_failures()


def test_declaring_a_wider_range_or_allowing_none_fixes_the_values_check() -> None:
    assert check_reward(broken.out_of_range, ROWS, range=(0.0, 2.0), checks=["values"]).passed
    assert check_reward(broken.none_not_allowed, ROWS, allow_none=True, checks=["values"]).passed


def test_declared_defaults_and_attributes() -> None:
    assert declared(broken.exact_answer).range == (0.0, 1.0) and declared(broken.exact_answer).allow_none
    assert not declared(broken.ExactAnswer()).allow_none  # the class says may_return_none = False
    assert declared(broken.exact_answer).columns == ("solution",)  # the required named parameter
    assert declared(TaskCompletion()).tool_use and not declared(broken.exact_answer).tool_use
    with pytest.raises(ValueError, match="low <= high"):
        declared(broken.exact_answer, range=(1.0, 0.0))


def trl_style(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    return [float(p in c) for p, c in zip(prompts, completions, strict=True)]


def positional(outputs: list[str], solution: list[str]) -> list[float]:
    return [float(o == s) for o, s in zip(outputs, solution, strict=True)]


TRL_ROWS = [{"prompt": "hi", "completion": "hi there"}, {"prompt": "yo", "completion": "no"}]


@pytest.mark.parametrize(
    ("reward", "rows", "detail"),
    [
        # Names prompts: it gets the rows' real prompts ("hi", "yo"), never an empty extra one. With prompts = ""
        # row 1 would score float("" in "no") = 1.0 instead of float("yo" in "no") = 0.0.
        (trl_style, TRL_ROWS, "with extra columns ['completion_ids', 'rewardkit_extra_column']"),
        (broken.exact_answer, ROWS, "with extra columns ['completion_ids', 'prompts', 'rewardkit_extra_column']"),
        # does not name it: prompts is one more extra
    ],
    ids=["trl-prompts", "completions-only"],
)
def test_extra_columns_leaves_prompts_to_a_reward_that_names_it(reward: Any, rows: list[dict], detail: str) -> None:
    assert check_reward(reward, rows, checks=["extra_columns"]).get("extra_columns") == Check(
        "extra_columns", True, detail
    )


@pytest.mark.parametrize(
    ("reward", "rows", "expected"),
    [
        (broken.exact_answer, ROWS, [1.0, 1.0, 0.0]),  # ms-swift / TRL: completions + columns
        (trl_style, TRL_ROWS, [1.0, 0.0]),
        (positional, [{"solution": "a", "completion": "a"}, {"solution": "a", "completion": "b"}], [1.0, 0.0]),
    ],
    ids=["keywords", "trl-prompts", "positional"],
)
def test_score_calls_any_reward_as_a_trainer_does(reward: Any, rows: list[dict[str, Any]], expected: list) -> None:
    assert score(reward, rows) == expected


GOLD = "<think>\nab\n</think>\n<answer>\n42\n</answer>"  # 7+1+2+1+8+1 + 8+1+2+1+9 = 41 characters


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        ("empty", ""),
        ("tags_only", "<think>\n\n</think>\n<answer>\n\n</answer>"),  # the tags and the whitespace
        ("truncated", GOLD[:20]),  # 41 // 2
        ("repeated", f"{GOLD}\n{GOLD}\n{GOLD}"),
        ("prompt_copy", "what is 6 * 7?"),
        ("max_length", ("\n".join([GOLD] * 401))[:MAX_CHARS]),  # 16384 // 41 + 2 copies, cut at 16384
    ],
)
def test_completion_probes(probe: str, expected: str) -> None:
    built = probes({"prompt": "what is 6 * 7?", "solution": "42", "completion": GOLD}, tool_use=False)
    assert built[probe] == {"prompt": "what is 6 * 7?", "solution": "42", "completion": expected}


@pytest.mark.parametrize(
    ("row", "names"),
    [
        ({"prompt": "what is 6 * 7?", "completion": GOLD}, COMPLETION_PROBES),
        ({"completion": GOLD}, tuple(n for n in COMPLETION_PROBES if n != "prompt_copy")),  # no prompt, no copy
    ],
    ids=["with-prompt", "without-prompt"],
)
def test_which_completion_probes_a_row_gets(row: dict[str, Any], names: tuple[str, ...]) -> None:
    assert tuple(probes(row, tool_use=False)) == names


def scores_anything(completions: list[Any], **kwargs: Any) -> list[float]:
    """1.0 for whatever it is given, odd cells included: every probe scores as the gold."""
    return [1.0] * len(completions)


class Unlistable(Mapping):
    """A ``rollout_infos`` that says it holds every key and cannot list them: building the probes raises."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("cannot list its keys")

    def __len__(self) -> int:
        return 1


ODD_TURNS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, 1, 2, 3]


@pytest.mark.parametrize(
    ("row", "tool_use", "check", "fragment"),
    [
        # The gold's text is "" (its last item is no message), so every probe is built from "" and scores 1.
        ({"completion": [1]}, False, "gaming:max_length", "row 0: scores 1, its gold 1 (needs <= 0.9"),
        # truncated keeps half of the 4 agent items: the assistant turn and 1, which is no message.
        ({"messages": ODD_TURNS, "completion": "ok"}, True, "gaming:truncated", "row 0: scores 1, its gold 1 (needs"),
        (
            {"messages": ODD_TURNS, "rollout_infos": Unlistable(), "completion": "ok"},
            True,
            "gaming",
            "building the probes raised RuntimeError: cannot list its keys",
        ),
    ],
    ids=["completion-not-messages", "messages-not-dicts", "probes-cannot-be-built"],
)
def test_odd_rows_fail_a_check_instead_of_raising(row: dict, tool_use: bool, check: str, fragment: str) -> None:
    report = check_reward(scores_anything, [row], checks=["gaming"], tool_use=tool_use)
    failed = {c.name: c.detail for c in report.failed()}
    assert check in failed and fragment in failed[check], report.summary()


def test_a_probe_ending_in_no_message_has_an_empty_completion() -> None:
    truncated = probes({"messages": ODD_TURNS, "completion": "ok"}, tool_use=True)["truncated"]
    assert truncated["messages"] == ODD_TURNS[:3] and truncated["completion"] == ""  # the user turn + 4 // 2 items


def test_tool_use_probes_all_score_zero_where_the_gold_scores_one() -> None:
    row = {"messages": CELLS["messages"][0], "task": CELLS["task"][0], "domain": "retail", "completion": ""}
    built = probes({**row, "rollout_infos": {"state_hash": "gold", "num_turns": 3}}, tool_use=True)
    names = ["empty", "truncated", "prompt_copy", "say_only", "no_op", "do_nothing", "transfer", "every_write"]
    assert list(built) == names
    assert all(p["rollout_infos"] == {"num_turns": 3} for p in built.values())  # the gold's record dropped
    assert "<tool_call>" not in str(built["say_only"]["messages"]) and "164.28" in built["say_only"]["completion"]
    # every_write: 1 user turn + 5 gold calls (2 messages each) + 3 extra writes (2 each) + the closing message
    assert len(built["every_write"]["messages"]) == 1 + 10 + 6 + 1
    assert score(TaskCompletion(), [row, *(dict(p, rollout_infos=None) for p in built.values())]) == [1.0] + [0.0] * 8


TRANSFER = '<tool_call>{"name": "transfer_to_human_agents", "arguments": {"summary": "undo it"}}</tool_call>'


# Retail 50's gold only hands over to a human and changes nothing: before, the do_nothing probe (a polite refusal, no
# call) scored its gold's 1.0 there ("row 0: scores 1, its gold 1"), while the write task beside it scored 0.
def test_the_do_nothing_probe_is_judged_on_each_row() -> None:
    task = RETAIL_TASKS["50"]
    agent = [{"role": "assistant", "content": TRANSFER}, {"role": "tool", "content": "Transfer successful"}]
    transfer = {"messages": [{"role": "user", "content": "Undo my cancellation."}, *agent], "task": task}
    write = {"messages": CELLS["messages"][0], "task": CELLS["task"][0]}
    rows = [{**row, "domain": "retail", "completion": ""} for row in (transfer, write)]
    report = check_reward(TaskCompletion(), rows, checks=["gaming:do_nothing"], tool_use=True)
    (check,) = report.checks
    assert check.name == "gaming:do_nothing" and check.passed and "on 2 row(s)" in check.detail, check


def test_hostile_inputs() -> None:
    assert HOSTILE["empty"] == "" and "\x00" in HOSTILE["nul_bytes"] and "\ud800" in HOSTILE["lone_surrogates"]
    assert len(HOSTILE["noise_1mb"]) == 1 << 20 and HOSTILE["deep_json"].count("[") == 100_000
    assert {n for n in HOSTILE if n.startswith("regex_bomb")} == {
        f"regex_bomb_{k}" for k in ("letters", "spaces", "tags", "open_tags")
    }


def test_bounded_kills_a_hang_and_reports_a_raise() -> None:
    start = time.monotonic()
    hung = bounded(lambda: time.sleep(30), 0.2)
    assert hung.status == "timeout" and time.monotonic() - start < 5  # 0.2 s + 0.5 s grace, not 30 s
    raised = bounded(lambda: 1 / 0, 1.0)
    assert (raised.status, raised.value) == ("raised", "ZeroDivisionError: division by zero")
    returned = bounded(lambda: [2.0], 1.0, isolate=False)
    assert (returned.status, returned.value) == ("ok", [2.0])


def test_shrink_finds_a_small_failing_string() -> None:
    # Fails while it holds a "!" and at least 3 a's: from 100 a's and a "!" down to "aaa!".
    assert shrink("a" * 100 + "!", lambda s: "!" in s and s.count("a") >= 3) == "aaa!"
    assert shrink("abc", lambda s: s == "abc") == "abc"  # nothing smaller fails: unchanged


def test_checks_selects_by_name_and_group() -> None:
    report = check_reward(broken.exact_answer, ROWS, checks=["shape", "hostile"], time_limit_s=FAST)
    assert [c.name for c in report.checks] == ["shape", *(f"hostile:{n}" for n in HOSTILE)]


@pytest.mark.parametrize(
    ("rows", "options", "message"),
    [
        ([], {}, "at least one row"),
        ([{"solution": "1"}], {}, "must be a dict with a 'completion'"),
        (["not a dict"], {}, "must be a dict with a 'completion'"),
        (ROWS, {"margin": -0.1}, r"margin must be a finite number in \[0, 1\]"),
        (ROWS, {"time_limit_s": 0}, r"time_limit_s must be a finite number in \(0, 3600\]"),
        (ROWS, {"range": (1.0, 0.0)}, "low <= high"),
        (ROWS, {"range": (0.0, math.inf)}, "two finite numbers"),
        (ROWS, {"range": (0.0,)}, "two finite numbers"),  # not a pair
        (ROWS, {"checks": ["shap"]}, "unknown check"),
    ],
    ids=["no-rows", "no-completion", "not-a-dict", "margin", "time-limit", "reversed", "infinite", "one", "checks"],
)
def test_unusable_arguments_raise(rows: list[Any], options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_reward(broken.exact_answer, rows, **options)


def test_report() -> None:
    report = Report([Check("shape", True, "ok"), Check("pickle", False, "TypeError: no")], reward="R")
    assert not report.passed and report.failed() == [Check("pickle", False, "TypeError: no")]
    assert report.as_dict()["checks"][1] == {"name": "pickle", "passed": False, "detail": "TypeError: no"}
    with pytest.raises(AssertionError, match=r"R: 1 of 2 checks failed\n  pickle: TypeError: no"):
        report.raise_for_failures()
    Report([Check("shape", True)]).raise_for_failures()  # all passed: no error
    with pytest.raises(AttributeError):
        report.checks[0].passed = False  # type: ignore[misc]  # frozen


def test_the_kit_and_its_plugin_import_nothing_heavy() -> None:
    code = (
        "import sys, rewardkit.testing.pytest_plugin; print(sorted(m for m in ('rewardkit.testing', 'torch', "
        "'swift', 'sentence_transformers') if m in sys.modules)); import rewardkit.testing; "
        "print(sorted(m for m in ('torch', 'swift', 'sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["['rewardkit.testing']", "[]"]


# (gold, probe, margin, short of the gold): the one probe rule, which lint RECIPE applies to its means too
SHORT_OF_GOLD = [
    (1.0, 0.8, 0.1, True),  # 0.2 below: a margin and more
    (1.0, 0.95, 0.1, False),  # 0.05 below: within the margin
    (1.0, 0.9, 0.1, False),  # 1.0 - 0.9 is 0.0999...98 in floats: not a full margin, as lint RECIPE has always judged
    (0.5, 0.5 - 1e-7, None, False),  # a near miss 1e-7 below: float noise (TOLERANCE 1e-6), not below
    (0.5, 0.49, None, True),  # a near miss below the gold by more than the noise
]


@pytest.mark.parametrize(("gold", "probe", "margin", "short"), SHORT_OF_GOLD)
def test_the_probe_rule(gold: float, probe: float, margin: float | None, short: bool) -> None:
    from rewardkit.testing.checks import short_of_gold

    assert short_of_gold(gold, probe, margin) is short
