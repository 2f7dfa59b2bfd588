"""Example rewards for the reward contract (rewardkit.testing): one good, and one broken for each check.

Each broken reward is the good ``exact_answer`` with one flaw, so the contract fails on the check named in
``BROKEN``; ``tests/test_testing_kit.py`` runs them, and ``rewardkit lint reward tests/broken_rewards.py:NAME``
can too. ``ROWS`` are their data: two gold completions and one wrong one (scores 1, 1, 0).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from typing import Any

ROWS = [
    {"solution": "42", "completion": "<answer>42</answer>"},
    {"solution": "7", "completion": "<answer>7</answer>"},
    {"solution": "5", "completion": "<answer>6</answer>"},  # wrong: scores 0
]


def text_of(completion: Any) -> str:
    """A string as it is; TRL's conversational completion as its last message's content."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def answer_of(text: str) -> str | None:
    """The text of the one ``<answer>…</answer>`` block, else None (none, or more than one)."""
    if text.count("<answer>") != 1 or text.count("</answer>") != 1:
        return None
    start, end = text.find("<answer>") + len("<answer>"), text.find("</answer>")
    return text[start:end].strip() if start <= end else None


def exact_answer(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    """1.0 iff the one answer block equals the row's ``solution``: the good reward, TRL style."""
    return [float(answer_of(text_of(c)) == str(s).strip()) for c, s in zip(completions, solution, strict=True)]


class ExactAnswer:
    """The same, as an ms-swift ORM class that declares its range."""

    range = (0.0, 1.0)
    may_return_none = False

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float]:
        return exact_answer(completions, kwargs["solution"])


def raises_on_empty(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    if any(text_of(c) == "" for c in completions):
        raise ValueError("empty completion")
    return exact_answer(completions, solution)


class HoldsALock:
    """Thread-safe by a lock, which cannot be pickled into ms-swift's or TRL's workers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
        with self.lock:
            return exact_answer(completions, solution)


def wrong_length(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    return [*exact_answer(completions, solution), 0.0]  # one too many


def returns_nan(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    return [s if s else math.nan for s in exact_answer(completions, solution)]


def out_of_range(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    return [2.0 * s for s in exact_answer(completions, solution)]  # 2.0 for a right answer, range [0, 1]


class NoneNotAllowed(ExactAnswer):
    """Declares ``may_return_none = False``, then abstains on a wrong answer."""

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [s or None for s in super().__call__(completions, **kwargs)]


class Nondeterministic:
    """Every second call halves its scores (state that leaks from one call into the next)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
        self.calls += 1
        return [s * (1.0 if self.calls % 2 else 0.5) for s in exact_answer(completions, solution)]


def batch_dependent(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    scores = exact_answer(completions, solution)
    right = sum(scores) or 1.0
    return [s / right for s in scores]  # credit shared among the batch's right answers: 1.0 alone, 0.5 with two


def mutates_inputs(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    scores = exact_answer(completions, solution)
    solution.reverse()  # the trainer's column, changed under it
    return scores


def rejects_extra_columns(completions: list[Any], solution: list[str]) -> list[float]:
    return exact_answer(completions, solution)  # no **kwargs: TRL's completion_ids and ms-swift's columns break it


def vague_missing_column(completions: list[Any], **kwargs: Any) -> list[float]:
    if kwargs.get("solution") is None:
        raise ValueError("bad batch")  # says neither which column nor how to fix it
    return exact_answer(completions, kwargs["solution"])


class ThreadUnsafe:
    """Keeps the batch on ``self`` between reading and scoring it: concurrent calls mix their batches."""

    def __init__(self) -> None:
        self.batch: tuple[list[Any], list[str]] = ([], [])

    def __call__(self, completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
        self.batch = (list(completions), list(solution))
        time.sleep(0.002)
        return exact_answer(*self.batch)


def rejects_conversational(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    return [float(c.strip() == f"<answer>{s}</answer>") for c, s in zip(completions, solution, strict=True)]


def slow_on_regex_bomb(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    # (a+)+$ backtracks exponentially on "aaa…a!": 2^n ways to split the a's before failing at the "!".
    if any(re.match(r"^(a+)+$", text_of(c)) for c in completions):
        return [0.0] * len(completions)
    return exact_answer(completions, solution)


def rewards_length(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    # Half for the right answer, half a length bonus saturating at 1000 characters.
    exact = exact_answer(completions, solution)
    return [0.5 * e + 0.5 * min(1.0, len(text_of(c)) / 1000) for e, c in zip(exact, completions, strict=True)]


# Content blindness: each scores every form probe 0 and keeps every generic check, but is fooled by a content probe.


def ignores_solution(completions: list[Any], **kwargs: Any) -> list[float]:
    """1.0 for any one non-empty answer block: never reads ``solution``, so another row's answer scores 1."""
    return [float(bool(answer_of(text_of(c)))) for c in completions]


def plan_experts(text: str) -> set[str] | None:
    """The set of expert names of a planning answer (``<answer>{"plan": [{"专家": …}]}</answer>``), else None."""
    body = answer_of(text)
    try:
        steps = json.loads(body)["plan"] if body else None
        return {step["专家"] for step in steps} if isinstance(steps, list) and steps else None
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def expert_set_only(completions: list[Any], solution: list[str], **kwargs: Any) -> list[float]:
    """1.0 iff the plan names the gold's set of experts: blind to which expert takes which step."""
    out = []
    for c, s in zip(completions, solution, strict=True):
        got = plan_experts(text_of(c))
        out.append(float(got is not None and got == plan_experts(f"<answer>{s}</answer>")))
    return out


def retail_writes() -> frozenset[str]:
    from rewardkit.envs import get_domain

    return get_domain("retail").write_tools


def write_names(messages: Any) -> list[str]:
    """The write tools an episode calls, by name, sorted (arguments ignored)."""
    from rewardkit.envs.tool_calls import tool_calls

    calls = tool_calls(messages if isinstance(messages, list) else [])
    return sorted(c.name for c in calls if c.name in retail_writes())


def any_write_of_the_gold(completions: list[Any], messages: list[Any], task: list[Any], **kwargs: Any) -> list[float]:
    """1.0 iff the episode calls the gold's write tools (as many times each), whatever their arguments."""
    out = []
    for m, t in zip(messages, task, strict=True):
        t = json.loads(t) if isinstance(t, str) else t
        gold = sorted(a["name"] for a in t["evaluation_criteria"]["actions"] if a["name"] in retail_writes())
        out.append(float(bool(gold) and write_names(m) == gold))
    return out


holds_a_lock = HoldsALock()
none_not_allowed = NoneNotAllowed()
nondeterministic = Nondeterministic()
thread_unsafe = ThreadUnsafe()

# name in this file -> the check it fails
BROKEN = {
    "raises_on_empty": "hostile:empty",
    "holds_a_lock": "pickle",
    "wrong_length": "shape",
    "returns_nan": "values",
    "out_of_range": "values",
    "none_not_allowed": "values",
    "nondeterministic": "determinism",
    "batch_dependent": "independence",
    "mutates_inputs": "no_mutation",
    "rejects_extra_columns": "extra_columns",
    "vague_missing_column": "missing_column",
    "thread_unsafe": "threads",
    "rejects_conversational": "conversational",
    "slow_on_regex_bomb": "hostile:regex_bomb_letters",
    "rewards_length": "gaming:max_length",
}
# name in this file -> the content probes it lets through (and no other check fails), on the rows of its kind
CONTENT_BLIND = {
    "ignores_solution": ("gaming:other_gold", "gaming:constant"),  # ROWS
    "expert_set_only": ("gaming:exchanged_experts",),  # planning rows (tests/test_kit_content.py)
    "any_write_of_the_gold": ("gaming:wrong_argument",),  # tau2 rows (tests/test_kit_content.py)
}
