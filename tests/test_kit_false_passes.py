"""The kit's false passes, one regression test each: a reward that exits, kills or hangs its process, probe scores
outside the values rules, the wrong ``trainer_state``, a verdict that hangs on row order or on chance, mutated
message lists, odd declarations and arguments.

Every reward here really runs, in the kit's forked children where it isolates; nothing is mocked.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import signal
import threading
import time
from typing import Any

import broken_rewards as broken
import pytest

from rewardkit.testing import check_reward, score
from rewardkit.testing.calling import TRAINER_STATE, DeclarationError
from rewardkit.testing.kit import KitError

ROWS = broken.ROWS
FAST = 0.3


def failed(report: Any) -> dict[str, str]:
    return {c.name: c.detail for c in report.failed()}


def exits_on_empty(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    if any(broken.text_of(c) == "" for c in completions):
        raise SystemExit(0)
    return broken.exact_answer(completions, solution)


def ends_process_on_empty(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    if any(broken.text_of(c) == "" for c in completions):
        os._exit(0)  # no exception to catch: only a child process can survive it
    return broken.exact_answer(completions, solution)


def kills_itself_on_empty(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    if any(broken.text_of(c) == "" for c in completions):
        os.kill(os.getpid(), signal.SIGKILL)
    return broken.exact_answer(completions, solution)


def hangs(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    time.sleep(3600)
    return broken.exact_answer(completions, solution)


@pytest.mark.parametrize(
    ("reward", "isolate", "fragment"),
    [
        (exits_on_empty, True, "RewardExit: the reward called sys.exit(0)"),  # SystemExit, raised in the child
        (exits_on_empty, False, "RewardExit: the reward called sys.exit(0)"),  # in this process: caught, not obeyed
        (ends_process_on_empty, True, "the process exited with status 0 before returning a result"),
        (kills_itself_on_empty, True, "the process was killed by SIGKILL"),
    ],
    ids=["sys-exit", "sys-exit-in-process", "os-exit", "sigkill"],
)
def test_a_reward_that_ends_its_process_fails_its_check(reward: Any, isolate: bool, fragment: str) -> None:
    report = check_reward(reward, ROWS, time_limit_s=FAST, isolate=isolate)
    bad = failed(report)
    # Only the empty completion ends it: the hostile "empty" input and the "empty" probe, nothing else.
    assert set(bad) == {"hostile:empty", "gaming:empty"}, report.summary()
    assert fragment in bad["hostile:empty"], bad


def test_a_hanging_gold_batch_fails_every_check_within_the_bound() -> None:
    start = time.monotonic()
    report = check_reward(hangs, ROWS, checks=["shape", "values", "determinism"], check_time_s=0.5)
    # The gold batch is given 0.5 s (+ 0.5 s grace); each check then reports its timeout instead of hanging.
    assert time.monotonic() - start < 10
    assert all("did not finish within 0.5 s" in d for d in failed(report).values()) and len(report.checks) == 3


class BadOnRepeated:
    """Declares [0, 1] and never None, then breaks it on the ``repeated`` probe (the gold three times)."""

    range = (0.0, 1.0)
    may_return_none = False

    def __init__(self, value: float | None) -> None:
        self.value = value

    def __call__(self, completions: list[Any], solution: list[str], **kwargs: Any) -> list[float | None]:
        scores = broken.exact_answer(completions, solution)
        return [
            self.value if broken.text_of(c).count("<answer>") == 3 else s
            for c, s in zip(completions, scores, strict=True)
        ]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (-math.inf, "-inf; scores must be finite"),  # would poison GRPO's advantages
        (math.nan, "nan; scores must be finite"),
        (-1e9, "-1000000000.0, outside the declared range [0.0, 1.0]"),
        (None, "None, and the reward declares it never returns None"),
    ],
    ids=["-inf", "nan", "-1e9", "none"],
)
def test_probe_scores_keep_the_values_rules(value: float | None, fragment: str) -> None:
    report = check_reward(BadOnRepeated(value), ROWS, checks=["gaming"])
    bad = failed(report)
    assert set(bad) == {"gaming:repeated"} and "breaks the values rules" in bad["gaming:repeated"], bad
    assert fragment in bad["gaming:repeated"], bad


def raises_surrogate(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    if any(broken.text_of(c) == "" for c in completions):
        raise ValueError("bad \ud800 input")
    return broken.exact_answer(completions, solution)


def test_a_lone_surrogate_in_a_message_is_escaped() -> None:
    report = check_reward(raises_surrogate, ROWS, checks=["hostile:empty"], time_limit_s=FAST)
    detail = report.get("hostile:empty").detail
    assert "bad \\ud800 input" in detail  # escaped, so it prints and writes
    json.dumps(report.as_dict(), ensure_ascii=False).encode("utf-8")
    report.summary().encode("utf-8")


def curriculum(completions: list[Any], solution: list[str], trainer_state: Any, **kwargs: Any) -> list[float]:
    """A sound curriculum reward: full credit from step 5 of training, half before. It needs ``trainer_state``,
    which ms-swift and TRL pass with every batch: one TrainerState, not a column."""
    scale = 1.0 if trainer_state.global_step >= 5 else 0.5
    return [s * scale for s in broken.exact_answer(completions, solution)]


def test_trainer_state_is_one_state_with_the_real_fields() -> None:
    from transformers.trainer_callback import TrainerState  # imports torch: here, not in the kit

    assert {f.name for f in dataclasses.fields(TrainerState)} <= set(vars(TRAINER_STATE))
    report = check_reward(curriculum, ROWS, time_limit_s=FAST)  # before: [object()] * 3 had no global_step
    assert report.passed, report.summary()
    assert score(curriculum, ROWS) == [1.0, 1.0, 0.0]  # step 10 of 20: full credit


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"gameable": "*"}, "gameable must map probe names"),  # a string, not a mapping
        ({"gameable": {"repaeted": "typo"}}, "gameable names 'repaeted', not a probe"),
        ({"gameable": {"repeated": ""}}, "must be the reason, a non-empty string"),
        ({"range": (1, 0)}, "low <= high"),
        ({"range": ("0", "1")}, "two finite numbers"),
        ({"range": (False, True)}, "two finite numbers"),  # booleans are not numbers
        ({"may_return_none": "no"}, "may_return_none must be True or False"),
        ({"columns": "solution"}, "columns must be a tuple of column names"),  # a string would be its letters
    ],
    ids=[
        "gameable-star",
        "gameable-typo",
        "gameable-no-reason",
        "range-reversed",
        "range-strings",
        "range-bools",
        "none-text",
        "columns-string",
    ],
)
def test_a_declaration_that_cannot_be_meant_is_refused(attributes: dict[str, Any], message: str) -> None:
    reward = type("Declared", (broken.ExactAnswer,), attributes)()
    with pytest.raises(DeclarationError, match=message):
        check_reward(reward, ROWS)


def raises_on_empty_for_seven(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    if any(broken.text_of(c) == "" and s == "7" for c, s in zip(completions, solution, strict=True)):
        raise ValueError("empty completion for 7")
    return broken.exact_answer(completions, solution)


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0], [1, 0, 2]], ids=["as-is", "reversed", "rotated"])
def test_hostile_inputs_go_into_every_usable_row(order: list[int]) -> None:
    # Only row "7" raises on the empty input; before, hostile inputs went into the first usable row only, so the
    # verdict depended on which row came first.
    report = check_reward(raises_on_empty_for_seven, [ROWS[i] for i in order], checks=["hostile"], time_limit_s=FAST)
    assert set(failed(report)) == {"hostile:empty"}, report.summary()
    assert f"in row {order.index(1)}" in failed(report)["hostile:empty"]


class Flaky:
    """Flips one score with probability 0.002, from its own seeded stream (so the test is repeatable)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
        scores = broken.exact_answer(completions, solution)
        return [1.0 - s if self.rng.random() < 0.002 else s for s in scores]


def test_a_flaky_reward_is_caught_by_the_stated_number_of_draws() -> None:
    # 4096 draws miss a 0.002 flip rate with probability 0.998 ** 4096 = 2.7e-4; before, one repeat of 3 scores
    # missed it with 0.998 ** 3 = 99.4%. Every one of 30 seeds is caught.
    for seed in range(30):
        report = check_reward(Flaky(seed), ROWS, checks=["determinism"], isolate=False)
        assert not report.passed, seed


class BackgroundLock:
    """Thread-safe by a lock that a background thread holds most of the time: a forked child inherits it held."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        threading.Thread(target=self._hold, daemon=True).start()

    def _hold(self) -> None:
        while True:
            with self.lock:
                time.sleep(0.01)
            time.sleep(0.0001)

    def __reduce__(self) -> tuple[Any, ...]:  # a fresh lock and thread in a copy
        return (BackgroundLock, ())

    def __call__(self, completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
        with self.lock:
            return broken.exact_answer(completions, solution)


def test_a_reward_that_cannot_fork_passes_in_process() -> None:
    report = check_reward(BackgroundLock(), ROWS, time_limit_s=1.0, isolate=False, skip=["threads"])
    assert report.passed, report.summary()


def clears_messages(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    scores = broken.exact_answer(completions, solution)
    for c in completions:
        if isinstance(c, list):
            c[-1]["content"] = ""  # the trainer's message, emptied under it
    return scores


def test_mutation_of_conversational_completions_is_caught() -> None:
    report = check_reward(clears_messages, ROWS, checks=["no_mutation", "conversational"])
    assert set(failed(report)) == {"conversational"}  # strings cannot change; the message lists did
    assert "changed the conversational completion of row 0" in failed(report)["conversational"]


def ms_swift_style(completions: list[str], solution: list[str], **kwargs: Any) -> list[float]:
    return [float(c.strip() == f"<answer>{s}</answer>") for c, s in zip(completions, solution, strict=True)]


def test_skip_leaves_a_check_out_and_the_report_says_so() -> None:
    assert "conversational" in failed(check_reward(ms_swift_style, ROWS, time_limit_s=FAST))  # never sees lists
    report = check_reward(ms_swift_style, ROWS, time_limit_s=FAST, skip=["conversational"])
    assert report.passed and report.skipped == ["conversational"]
    assert "conversational" not in {c.name for c in report.checks}
    assert "(1 skipped: conversational)" in report.summary() and report.as_dict()["skipped"] == ["conversational"]


def test_rows_may_be_a_generator() -> None:
    listed = check_reward(broken.exact_answer, ROWS, checks=["gaming"])
    generated = check_reward(broken.exact_answer, (r for r in ROWS), checks=["gaming"])
    assert generated.as_dict() == listed.as_dict() and len(generated.checks) == 7  # read once, all probes built


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"checks": []}, "checks=\\[\\] selects no check"),
        ({"skip": ["shap"]}, "skip: unknown check"),
        ({"checks": ["shape"], "skip": ["shape"]}, "leaves no check to run"),
        ({"margin": math.nan}, "margin must be a finite number"),
        ({"margin": 2.0}, r"margin must be a finite number in \[0, 1\]"),  # wider than the range [0, 1]
        ({"time_limit_s": math.inf}, "time_limit_s must be a finite number"),
        ({"time_limit_s": math.nan}, "time_limit_s must be a finite number"),
        ({"check_time_s": 0}, "check_time_s must be a finite number"),
        ({"draws": 0}, "draws must be an integer >= 1"),
    ],
    ids=[
        "checks-empty",
        "skip-unknown",
        "skip-all",
        "margin-nan",
        "margin-wide",
        "time-inf",
        "time-nan",
        "check-time-0",
        "draws-0",
    ],
)
def test_arguments_that_cannot_mean_anything_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(KitError, match=message):
        check_reward(broken.exact_answer, ROWS, **options)
