"""A user simulator that makes known mistakes at a known rate: the labelled episodes that measure the user review.

It wraps another simulator. At an episode's opening it decides, with probability ``rate``, to make one mistake in
it, and of which kind (seeded by the task and how many episodes of it came before, so a rerun makes the same
mistakes); it then makes it at the first reply where that kind can be made, and names it in the reply's
``Progress.mistake``, which the episode records (``EpisodeRecord.user_sim_fault``): the label the review's flags are
scored against. An episode where the kind never fits (no confirmation asked, no approval waiting) has no mistake.
Each mistake is the kind :mod:`rewardkit.loop.user_review` names, in the domain's language (English and Chinese):

- ``premature_stop``: where the agent asks to confirm an action, the user agrees and stops in the same breath;
- ``unseen_fact``: the reply carries an order number the user was never given;
- ``role_break``: the user answers as the agent would;
- ``wrong_approval``: an approval request answered against the scenario;
- ``wrong_language``: the reply in the other language;
- ``no_stop``: once the task is done, the user never ends the conversation: each stop becomes another question;
- ``loop``: the user sends its previous message again;
- ``no_decision``: approval requests are answered without a decision marker, every time they wait;
- ``no_request``: the opening asks nothing in particular, and what the user wants is never said (the honest opening,
  which says it, is replaced);
- ``cut_reply``: the reply is cut in the middle, as a model's reply stopped at its token cap (``Progress.cut``).

Each episode gets at most one mistake, so its label is one kind. The rollouts of one task may run at once (a GRPO
group): the simulator tells them apart by ``Progress.episode``.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.approvals import APPROVE, DECLINE
from rewardkit.envs.tasks import approves
from rewardkit.loop.user_sim.base import (
    CONFIRMATION_REQUEST,
    LOOP_CHARS,
    MISTAKES,
    STOP,
    Progress,
    Turn,
    UserSimulator,
)

MAX_PLANNED = 65_536  # episodes whose mistake is still to be made, at most (the oldest plans are forgotten)
FAULTS = MISTAKES
REPEATED = {"no_stop", "no_decision", "no_request"}  # made at every reply where they fit, not once
CALL = '<tool_call>{"name": "get_user_details", "arguments": {}}</tool_call>'
# Each mistake in a few wordings a language, one drawn per episode.
LINES = {
    "en": {
        "premature_stop": (f"Yes, go ahead. {STOP}", f"Sure, do it. Thanks, bye! {STOP}", f"Okay, confirmed. {STOP}"),
        "unseen_fact": (
            "Also, please check my other order #W9999917 while you are at it.",
            "My backup e-mail is lee.k@example.org, if that helps.",
            "The charge was 312.40 dollars, by the way.",
        ),
        "role_break": (
            "How can I help you today? I have processed your request.",
            "As an assistant, I can look that up for you.",
            CALL,
        ),
        "other_language": ("好的，请继续处理。", "没问题，谢谢。", "请帮我查一下。"),
        # Under LOOP_CHARS: said at every stop, a longer line would be a loop as well, and the label one kind
        "no_stop": ("Thanks. One more thing?", "Great. Anything else?"),
        "no_decision": ("Hmm, what does it mean?", "Let me look first."),  # under LOOP_CHARS: said every time
        # Under LOOP_CHARS, as no_stop's: said at every reply
        "no_request": ("Hi, a quick question.", "Hello, I need help."),
        "approve": (f"Yes, I approve that. {APPROVE}",),
        "decline": (f"No, I do not approve that. {DECLINE}",),
    },
    "zh": {
        "premature_stop": (f"是的，确认。{STOP}", f"好的，就这样吧。{STOP}", f"可以，谢谢。{STOP}"),
        "unseen_fact": (
            "另外帮我看看订单 #W9999917。",
            "我的备用邮箱是 lee.k@example.org。",
            "上次的金额是 312.40 元。",
        ),
        "role_break": ("请问有什么可以帮您？我已为您处理好了。", "我已帮您查好了，还有别的吗？", CALL),
        "other_language": ("Okay, please go on with it.", "Sure, thanks a lot.", "Please check it for me."),
        "no_stop": ("谢谢。还有别的吗？", "好的。再确认一下？"),
        "no_decision": ("这个对我有什么影响？", "我先看看。"),
        "no_request": ("你好，我有个问题。", "在吗？问一下。"),
        "approve": (f"同意。{APPROVE}",),
        "decline": (f"不同意。{DECLINE}",),
    },
}


class FaultySimulator:
    """``inner``'s replies, with one mistake of ``kinds`` made in an episode at rate ``rate`` where one can be."""

    def __init__(self, inner: UserSimulator, kinds: Sequence[str] = FAULTS, rate: float = 0.2, seed: int = 0) -> None:
        unknown = [k for k in kinds if k not in FAULTS]
        if unknown or not 0 <= rate <= 1:
            raise ValueError(
                f"FaultySimulator: kinds from {', '.join(FAULTS)} and a rate in [0, 1]; got {unknown}, {rate}"
            )
        self.inner, self.kinds, self.rate, self.seed = inner, tuple(kinds), rate, seed
        self.name = f"faulty({inner.name})"
        # episode number -> the kind decided at its opening and its wordings, until the mistake is made
        self._planned: dict[int, tuple[str, dict[str, str]]] = {}
        self._openings: Counter[str] = Counter()  # task id -> the episodes of it opened so far
        self._lock = threading.Lock()

    def fingerprint(self) -> str:
        spec = f"faulty:{self.inner.fingerprint()}:{','.join(self.kinds)}:{self.rate}:{self.seed}"
        return hashlib.sha256(spec.encode()).hexdigest()

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        honest = self.inner.reply(task, dialogue, progress)
        if not any(t.role == "user" for t in dialogue):  # the opening: decide this episode's mistake
            self._plan(str(task.get("id")), progress)
            with self._lock:
                planned = self._planned.get(progress.episode)
            if planned is None or planned[0] != "no_request":  # the one mistake made at the opening
                return honest
            progress.mistake = "no_request"
            return planned[1]["no_request"]
        with self._lock:
            planned = self._planned.get(progress.episode)
        if planned is None:
            return honest
        kind, lines = planned
        made = self._make(kind, task, dialogue, progress, honest, lines)
        if made is None:
            return honest
        if kind not in REPEATED:  # made once; a user that never stops (or never decides) does so every time
            with self._lock:
                self._planned.pop(progress.episode, None)
        progress.mistake = kind
        return made

    def _plan(self, task_id: str, progress: Progress) -> None:
        with self._lock:
            nth = self._openings[task_id]
            self._openings[task_id] += 1
        draw = random.Random(f"{self.seed}:{task_id}:{nth}")
        if not self.kinds or draw.random() >= self.rate:
            return
        kind = draw.choice(self.kinds)
        lines = {k: draw.choice(v) for k, v in LINES.get(progress.language, LINES["en"]).items()}
        with self._lock:
            self._planned[progress.episode] = (kind, lines)
            if len(self._planned) > MAX_PLANNED:  # an episode whose kind never fitted: forget the oldest
                del self._planned[next(iter(self._planned))]

    @staticmethod
    def _make(
        kind: str,
        task: Mapping[str, Any],
        dialogue: Sequence[Turn],
        progress: Progress,
        honest: str,
        lines: Mapping[str, str],
    ) -> str | None:
        """The mistaken reply of ``kind`` here, or None where it cannot be made."""
        if kind == "no_request":  # from the opening on, every reply but a stop or a decision says nothing in particular
            return None if STOP in honest or progress.requests else lines["no_request"]
        if kind == "no_stop":  # an honest stop once the task is done: another question instead
            return lines["no_stop"] if STOP in honest and progress.state_done else None
        asks = CONFIRMATION_REQUEST.get(progress.language, CONFIRMATION_REQUEST["en"]).search(dialogue[-1].text)
        if kind == "premature_stop":
            return lines["premature_stop"] if asks and not progress.requests and STOP not in honest else None
        if kind == "wrong_approval":
            if not progress.requests:
                return None
            return lines["decline"] if approves(task) else lines["approve"]
        if kind == "no_decision":
            return lines["no_decision"] if progress.requests else None
        if progress.requests:  # the honest reply decides an approval: that is wrong_approval's place
            return None
        if kind == "loop":  # the previous message again, where it is long enough to be a loop and not a "yes"
            said = [t.text for t in dialogue if t.role == "user"]
            return said[-1] if len(said[-1]) >= LOOP_CHARS and "###" not in said[-1] else None
        if kind == "cut_reply":  # half the honest reply, as a reply stopped at the token cap
            if len(honest) < 2 * LOOP_CHARS:
                return None
            progress.cut = True
            return honest[: len(honest) // 2]
        if kind == "unseen_fact":  # said before the honest reply, so that a stop stays at the end
            return f"{lines['unseen_fact']} {honest}"
        if kind == "role_break":
            return lines["role_break"]
        return lines["other_language"]  # wrong_language
