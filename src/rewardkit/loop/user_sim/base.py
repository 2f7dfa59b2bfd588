"""What every user simulator shares: the dialogue it sees, the stop tokens, its errors.

A simulator plays the customer. It sees only the visible conversation (the agent's
text to the user and its own earlier messages), never tool calls or tool results,
as in tau2-bench. Simulators are synchronous and thread-safe; the rollout loop runs
many of them at once in worker threads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

# tau2-bench's user stop tokens: the user is satisfied, was transferred, or cannot go on.
STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
MARKERS = re.compile(r"###[A-Z-]+###")  # any marker a user writes: these three, ###APPROVE###, ###DECLINE###
# The agent's opening line, by the domain's language (tau2-bench's in English); the simulator's history starts with
# it, so a Chinese domain's customer is not greeted in English.
GREETINGS = {"en": "Hi! How can I help you today?", "zh": "您好！请问有什么可以帮您？"}
GREETING = GREETINGS["en"]
# How an agent asks the user to confirm an action, by language: what the scripted user says yes to, what the user
# review reads in the agent's message before a stop, where the faulty simulator stops too early.
CONFIRMATION_REQUEST = {
    "en": re.compile(
        r"\b(?:confirm\w*|proceed|shall i|should i|would you like me to|do you want me to|go ahead)\b"
        r"|\byes\s*/\s*no\b",
        re.IGNORECASE,
    ),
    "zh": re.compile(r"确认|是否|要不要|可以吗|好吗|同意|批准|审批|继续"),
}
# The simulated user's mistakes by kind: what the user review flags and what the faulty simulator makes.
MISTAKES = (
    "premature_stop",
    "unseen_fact",
    "role_break",
    "wrong_approval",
    "wrong_language",
    "no_stop",
    "loop",
    "no_decision",
    "no_request",
    "cut_reply",
)
# A user message sent again is a loop (a model stuck, not a customer) from this many characters on: shorter ones
# ("Yes, please.", "好的，谢谢") are a customer's, however often they come.
LOOP_CHARS = 24


class SimulatorError(RuntimeError):
    """The simulator could not produce a reply (endpoint down, timed out, bad response) after its retries.

    Not the policy's fault: the episode ends as ``user_sim_error`` and is left out of training.
    """

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(f"user simulator {endpoint}: {message}")
        self.endpoint = endpoint


@dataclass(frozen=True)
class Turn:
    """One visible message: ``agent`` (the policy's text to the user) or ``user`` (the simulator's).

    Of a user message, the episode also keeps what the user review reads beside its text: ``cut``, the simulator's
    reply stopped at its token cap (``Progress.cut``), and ``waiting``, approval requests were waiting for the user
    when it was written."""

    role: Literal["agent", "user"]
    text: str
    cut: bool = False
    waiting: bool = False


class Progress:
    """What the episode knows beyond the dialogue.

    ``state_done``: the task is complete as ``task_completion`` judges it (the database equals the gold
    final state, and on a task whose gold changes nothing its evidence was shown: ``Goal.reached``);
    ``outputs_said``: every expected output (``communicate_info``) has appeared in one agent message
    (both read by the scripted simulator only). ``requests``: the agent's soft-gated calls waiting for the
    user's approval, as the harness worded them (the approval card a real user would see); a reply carrying
    ``###APPROVE###`` or ``###DECLINE###`` decides them all. ``language``: the domain's (``Domain.language``).
    ``episode``: the episode's number in this process, for a simulator that keeps state per episode (several
    rollouts of one task run at once). ``mistake``: written by a simulator that errs on purpose
    (:class:`~rewardkit.loop.user_sim.faulty.FaultySimulator`): the kind of mistake its reply makes, the label the
    user review is measured against; the episode records it. ``cut``: written by a simulator whose reply stopped
    at its token cap even when retried (a model's ``finish_reason`` ``length``); the user review flags it.

    ``state_done`` may be given as a function: it is then called once, when first read. Comparing the state
    hashes the whole database, and a simulator that never reads it (an LLM's, which sees the dialogue) should
    not pay for it on every turn of every rollout.
    """

    __slots__ = ("_state", "cut", "episode", "language", "mistake", "outputs_said", "requests")

    def __init__(
        self,
        state_done: bool | Callable[[], bool] = False,
        outputs_said: bool = False,
        requests: tuple[str, ...] = (),
        language: str = "en",
        episode: int = 0,
    ) -> None:
        self._state, self.outputs_said, self.requests, self.language = state_done, outputs_said, requests, language
        self.episode = episode
        self.mistake: str | None = None
        self.cut = False

    @property
    def state_done(self) -> bool:
        if callable(self._state):
            self._state = bool(self._state())
        return self._state

    def __repr__(self) -> str:
        state = "unread" if callable(self._state) else self._state
        return (
            f"Progress(state_done={state}, outputs_said={self.outputs_said}, requests={self.requests!r}, "
            f"language={self.language!r}, episode={self.episode})"
        )


@runtime_checkable
class UserSimulator(Protocol):
    name: str  # the endpoint (or "scripted"), for logs and error messages

    def fingerprint(self) -> str:
        """A stable identity of everything that shapes replies (kind, model, prompt, temperature…)."""
        ...

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        """The user's next message after ``dialogue`` (which starts with the agent's greeting)."""
        ...
