"""One agent <-> user <-> database conversation and why it ended.

The caller alternates two steps:

- :meth:`Episode.agent_turn` with the policy's message: tool calls run on the episode's
  own database copy and their results wait in :attr:`Episode.pending` as ``tool``
  messages; a message without tool calls is addressed to the user;
- :meth:`Episode.user_turn` (only when ``agent_turn`` returned True): the simulator
  answers; its reply waits in ``pending`` as a ``user`` message, unless it is a stop.

Tool calls are read from Hermes ``<tool_call>`` blocks in the text, or from the
engine's parsed ``tool_calls`` when the text has none (one source, never both, so a
call is not run twice). The simulator never sees tool turns, as in tau2-bench.

Every use of the environment (opening it, tool calls, the approval requests, the user's own actions, the state
hash, the audit, closing it) goes through one guard, :meth:`Episode._env`: a ``ConnectionError`` (an MCP server
that went away: killed, or restarted without the episode's session) ends this episode as ``env_error``, a tool
model that gave no usable answer as ``tool_sim_error``, instead of escaping into the run.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from rewardkit.envs import Domain
from rewardkit.envs.approvals import user_decision
from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.harness import CallingEnvironment
from rewardkit.envs.outcomes import Goal, Outcome, recorded_outcome
from rewardkit.envs.simulated import ToolSimError
from rewardkit.envs.state_diff import Changes
from rewardkit.envs.tasks import communicated_texts
from rewardkit.envs.termination import EXCLUDED, Termination
from rewardkit.envs.tool_calls import ToolCall, tool_calls, user_facing_texts
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.roles import RoleError
from rewardkit.loop.user_review import ModelReviewer, UserFlag, review
from rewardkit.loop.user_sim.base import (
    GREETING,
    GREETINGS,
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    Progress,
    SimulatorError,
    Turn,
    UserSimulator,
)

_USER_STOPS = ((STOP, Termination.USER_STOP), (TRANSFER, Termination.USER_TRANSFER))
_USER_STOPS += ((OUT_OF_SCOPE, Termination.USER_OUT_OF_SCOPE),)


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
T = TypeVar("T")
_NUMBERS = itertools.count(1)  # each episode of the process its own number (Progress.episode)


# What an environment raises when the infrastructure under it fails (never the policy's doing), and the ending
# that gives its episode; anything else an environment raises is a bug, and propagates.
ENV_FAILURES = (ConnectionError, ToolSimError)


def env_ending(exc: BaseException) -> Termination:
    """The ending of an episode whose environment raised ``exc`` (one of :data:`ENV_FAILURES`)."""
    return Termination.TOOL_SIM_ERROR if isinstance(exc, ToolSimError) else Termination.ENV_ERROR


class _EnvGone(Exception):
    """The environment stopped answering; the episode has ended as env_error (or tool_sim_error)."""


def _native_calls(native: Any) -> list[ToolCall]:
    """The engine's parsed ``tool_calls`` (objects or dicts) read like OpenAI messages."""
    if not native:
        return []
    items = [c.model_dump() if hasattr(c, "model_dump") else c for c in native]
    if not all(isinstance(c, Mapping) for c in items):
        return [ToolCall("", {}, "tool_calls must be a list of objects")]
    return tool_calls([{"role": "assistant", "content": None, "tool_calls": items}])


class Turns:
    """What the scheduler and the drivers read of any episode, here or on a server (:mod:`rewardkit.loop.remote_env`):
    how it ended (None while it runs), the messages waiting to be shown to the policy, and the user's closing line:
    the message that ended the episode (a stop, a transfer), which nothing answers, so the policy never sees it
    (it is no training token) but the episode log does."""

    termination: Termination | None
    pending: list[dict[str, str]]
    closing: str | None = None

    @property
    def done(self) -> bool:
        return self.termination is not None

    def take_pending(self) -> list[dict[str, str]]:
        out, self.pending = self.pending, []
        return out


class Episode(Turns):
    """A conversation on a private copy of ``domain``'s database about ``task``."""

    def __init__(
        self,
        domain: Domain,
        task: Mapping[str, Any],
        simulator: UserSimulator,
        limits: RolloutLimits,
        goal: Goal | None = None,
        reviewer: ModelReviewer | None = None,
    ) -> None:
        self.domain, self.task, self.simulator, self.limits = domain, task, simulator, limits
        self.reviewer = reviewer  # the model reviewer of the user, after the rules (user_sim.review_url)
        # A database domain's copy waits until the opening is asked for (a fresh copy's approval requests are its
        # template's): the rollouts of a batch then copy while their openings are in flight (``prepare``). Any
        # other environment (an MCP session, a simulated one) opens here, so a failure to open shows at once.
        self._fresh_requests = domain.fresh_requests()
        self._environment: CallingEnvironment | None = None
        self._opening = threading.Lock()
        if self._fresh_requests is None:
            self._environment = domain.env_for(task)
        self.goal = goal  # what completes the task: the scripted user stops on it; the record hands it to the reward
        self.dialogue: list[Turn] = [Turn("agent", GREETINGS.get(domain.language, GREETING))]
        self.agent_said: list[str] = []  # every assistant message's user-facing text
        self.transcript: list[str] = []
        self.pending: list[dict[str, str]] = []
        self.turns = self.tool_calls = self.tool_errors = self.policy_tokens = 0
        self.termination: Termination | None = None
        self.error: str | None = None
        self.user_flags: tuple[UserFlag, ...] = ()
        self.number = next(_NUMBERS)
        self.user_sim_fault: str | None = None  # the mistake a simulator made on purpose (Progress.mistake)

    # --- the two steps -------------------------------------------------------------

    def open(self) -> str | None:
        """The user's first message (a simulator call), or None if the episode already ended
        (the simulator failed, or its opening was a stop, or the environment could not be opened)."""
        if self.termination is None:
            self.user_turn()
        return self.pending.pop()["content"] if self.pending else None

    def agent_turn(
        self, text: str | None, finish_reason: str | None = None, n_tokens: int = 0, native: Any = None
    ) -> bool:
        """Take the policy's message; True if the user must answer it now."""
        if self.termination is not None:  # the simulator already failed at the start
            return False
        text = text if isinstance(text, str) else ""
        self.turns += 1
        self.policy_tokens += n_tokens
        self.transcript.append(f"assistant: {text}")
        message = {"role": "assistant", "content": text}
        # Blocks in the text, else the engine's parse (one source: a call never runs twice).
        calls = (tool_calls([message]) if "<tool_call>" in text else []) or _native_calls(native)
        said = _THINK.sub("", "".join(user_facing_texts([message]))).strip()  # the user never sees the reasoning
        self.agent_said.append(said)
        if finish_reason == "length":  # a cut-off message: its last call may be cut too, run none
            return self._end(Termination.LENGTH)
        if not calls and not text.strip():  # nothing said, nothing called: the policy's own ending, scored 0
            return self._end(Termination.EMPTY_REPLY)
        try:
            for call in calls:
                self._run(call)
                if self.tool_errors >= self.limits.error_budget:  # spent: a flood of bad calls costs no more
                    break
        except _EnvGone:  # the server went away: the remaining calls cannot run either
            return False
        if self.termination is not None:
            return False
        if not calls and STOP in said:
            return self._end(Termination.AGENT_STOP)
        if self.tool_errors >= self.limits.error_budget:
            return self._end(Termination.ERROR_BUDGET)
        if self.policy_tokens >= self.limits.token_budget:
            return self._end(Termination.TOKEN_BUDGET)
        if self.turns >= self.limits.max_turns:
            return self._end(Termination.MAX_TURNS)
        if calls:
            return False
        self.dialogue.append(Turn("agent", said))
        return True

    def user_turn(self) -> None:
        """Ask the simulator for the user's next message (blocking: run it in a worker thread)."""
        try:
            progress = self.progress()
        except _EnvGone:  # the state hash could not be read: the episode has ended as env_error
            return
        try:
            reply = self.simulator.reply(self.task, list(self.dialogue), progress)
        except _EnvGone:  # the state hash, read by the simulator, could not be: the episode has ended as env_error
            return
        except SimulatorError as exc:
            self.error = str(exc)
            self._end(Termination.USER_SIM_ERROR)
            return
        self.user_sim_fault = self.user_sim_fault or progress.mistake
        self.dialogue.append(Turn("user", reply, cut=progress.cut, waiting=bool(progress.requests)))
        self.transcript.append(f"user: {reply}")
        decision = user_decision(reply)
        if decision is not None and progress.requests:  # the user's own action, run by the loop, never the agent
            try:
                self._decide(decision)
            except _EnvGone:
                return
        for token, reason in _USER_STOPS:
            if token in reply:
                self.closing = reply
                self._end(reason)
                return
        self.pending.append({"role": "user", "content": reply})

    def end(self, reason: Termination, error: str | None = None) -> None:
        """End from outside (ms-swift's own turn limit, a failed agent endpoint); the first reason stays."""
        if self.termination is None and error is not None:
            self.error = error
        self._end(reason)

    # --- state ---------------------------------------------------------------------

    @property
    def env(self) -> CallingEnvironment:
        """The episode's environment, opened on first use (or by :meth:`prepare`)."""
        if self._environment is None:
            with self._opening:
                if self._environment is None:
                    self._environment = self.domain.env_for(self.task)
        return self._environment

    def prepare(self) -> None:
        """Open the environment now (a database copy): call it while the opening is in flight. One that cannot be
        opened ends the episode."""
        with contextlib.suppress(_EnvGone):
            self._env("opening the environment", lambda env: env)

    def progress(self) -> Progress:
        waiting: Sequence[Mapping[str, Any]]
        if self._environment is None and self._fresh_requests is not None:  # not copied yet: the template's
            waiting = self._fresh_requests
        else:
            waiting = self._env("the approval requests", lambda env: env.pending_approvals())
        requests = tuple(
            f"{r['id']}: {r['tool']} {json.dumps(r['arguments'], ensure_ascii=False)} ({r['rule']})" for r in waiting
        )
        language = self.domain.language
        goal = self.goal
        if goal is None:
            return Progress(requests=requests, language=language, episode=self.number)
        said = all(communicated_texts(self.agent_said, goal.outputs))
        # The task-completion rule itself (TaskCompletion's): a transfer task is not done before the transfer.
        done = partial(goal.reached, self.agent_said, self._outcome)
        return Progress(state_done=done, outputs_said=said, requests=requests, language=language, episode=self.number)

    def _outcome(self) -> Outcome:
        """The episode's outcome so far: the state hash, and the audit's calls where the goal reads them."""
        state = self._env("the state hash", lambda env: env.state_hash())
        audit = (
            self._env("the audit", lambda env: env.audit()) if self.goal is not None and self.goal.needs_calls else []
        )
        return recorded_outcome(state, audit)

    def infos(self) -> EpisodeRecord:
        """The episode's record: what the rewards and the logs read (its JSON form is ms-swift's ``rollout_infos``).

        A state that cannot be read at the end makes the episode ``env_error`` whatever ended it: its outcome
        cannot be judged."""
        state, audit = None, []
        try:
            if self.termination is not Termination.ENV_ERROR:  # asking its server again would fail again
                state = self._env("the state hash", lambda env: env.state_hash(), force=True)
            audit = self._env("the audit", lambda env: env.audit(), force=True)  # an MCP adapter's own record
        except _EnvGone:
            state = None
        return EpisodeRecord(
            termination=self.termination.value if self.termination else None,
            turns=self.turns,
            tool_calls=self.tool_calls,
            tool_errors=self.tool_errors,
            policy_tokens=self.policy_tokens,
            state_hash=state,
            audit=tuple(audit),
            agent_said=tuple(self.agent_said),
            transcript="\n".join(self.transcript),
            user_sim=self.simulator.name,
            error=self.error,
            user_flags=tuple(flag.to_json() for flag in self.user_flags),
            user_sim_fault=self.user_sim_fault,
            goal=self.goal,
        )

    def changes(self) -> Changes | None:
        """What the episode's writes changed in its database, by the environment's own tracking (the SQLite tables'):
        None where it tracks none (a tool server's, a simulated memory) or the state could not be read."""
        if self._environment is None:  # never opened: no call was made
            return {}
        return None if self.termination is Termination.ENV_ERROR else self._environment.changes()

    def close(self) -> None:
        if self._environment is None:  # never opened: nothing to release
            return
        with contextlib.suppress(_EnvGone):  # a session whose server is gone: nothing is left to release
            self._env("closing the environment", lambda env: env.close())

    # --- internals -----------------------------------------------------------------

    def _env(self, what: str, use: Callable[[CallingEnvironment], T], force: bool = False) -> T:
        """The guard around every use of the environment (opened here on first use): a lost connection ends the
        episode as env_error (with ``force``, even one that had ended otherwise: its final state cannot be read)
        and raises _EnvGone."""
        try:
            return use(self.env)
        except ENV_FAILURES as exc:
            ending = env_ending(exc)
            if force and self.termination is not ending:
                self.termination = None
            self.end(ending, f"{what}: {exc}")
            raise _EnvGone from exc

    def _run(self, call: ToolCall) -> None:
        result = self._env(f"tool call {call.name or '?'}", lambda env: env.execute(call))
        self.tool_calls += 1
        self.tool_errors += not result.ok
        content = result.text()
        self.transcript.append(f"tool {call.name or '?'}: {content}")
        self.pending.append({"role": "tool", "content": content})
        if result.ok and call.name in self.domain.stop_tools:
            self._end(Termination.AGENT_TRANSFER)

    def _decide(self, decision: str) -> None:
        """Run the user-side ``decision`` on every request waiting for the user."""
        for request in self._env("the approval requests", lambda env: env.pending_approvals()):
            arguments = {"request_id": request["id"]}
            result = self._env(f"user action {decision}", lambda env, a=arguments: env.user_call(decision, a))
            self.transcript.append(f"user action {decision} {request['id']}: {result.code.value}")

    def _end(self, reason: Termination) -> bool:
        """End the episode (the first reason stays), then review the simulated user's part in it."""
        if self.termination is None:
            self.termination = reason
            self._review()
        return False

    def _review(self) -> None:
        """The user review (:mod:`rewardkit.loop.user_review`) of the finished dialogue: its flags are recorded, and
        with ``rollout.user_review: exclude`` (the training scheduler's default) a flagged episode ends as
        ``user_sim_mistake``. The rules first; the model reviewer, if any, reads what they passed. A reviewer that
        cannot answer is the simulator side's infrastructure failing: the episode ends as ``user_sim_error``."""
        mode = self.limits.user_review or "count"  # the trainer's scheduler makes its own default `exclude`
        if mode == "off" or self.termination in EXCLUDED:
            return
        seen = [line for line in self.transcript if line.startswith("tool ")]
        goal = self.goal
        reached = None if goal is None else partial(goal.reached, self.agent_said, self._outcome)
        language = self.domain.language
        try:
            ending = self.termination
            self.user_flags = review(
                self.task, self.dialogue, language=language, tool_texts=seen, reached=reached, termination=ending
            )
            if not self.user_flags and self.reviewer is not None:
                self.user_flags = self.reviewer.review(self.task, self.dialogue, language=language, tool_texts=seen)
        except _EnvGone:  # the state could not be read to tell a premature stop: the episode ended as env_error
            return
        except RoleError as exc:
            self.termination, self.error = Termination.USER_SIM_ERROR, f"the user reviewer: {exc}"
            return
        if self.user_flags and mode == "exclude":
            self.termination = Termination.USER_SIM_MISTAKE
            self.error = "the user review flagged " + "; ".join(f"{f.kind} ({f.evidence})" for f in self.user_flags)
