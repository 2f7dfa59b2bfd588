"""A domain as an OpenEnv environment: one episode per session, the simulated user and the reward on the server.

    rewardkit env serve --openenv --domain retail --port 8000          # loopback; elsewhere --token is required

Built on ``openenv-core`` (``create_fastapi_app``): each WebSocket session (``/ws``, what OpenEnv's ``EnvClient``
speaks) gets its own :class:`DomainEnvironment`, so sessions never share a database; their number is capped
(``max_sessions``) and an idle one is closed after ``idle_s``. An episode is the loop training runs
(:class:`rewardkit.loop.drive.Conversation`: the harness's gates and approvals, the user review):

- ``reset(task_id=..., split=..., seed=...)`` opens the episode on a private copy of the database: the task by id,
  else one drawn from ``split`` (default: every task) by ``seed``. The observation's ``messages`` are the agent's
  system prompt (the domain's policy) and the simulated user's opening; ``tools`` the OpenAI function specs.
- ``step(AgentTurn(content=..., tool_calls=...))`` takes the agent's message (Hermes ``<tool_call>`` blocks in the
  text, or OpenAI-shaped ``tool_calls``), runs its calls under the harness's rules, lets the user answer when it
  is spoken to, and returns the new ``messages`` (tool results, the user's reply).
- When the episode ends, ``done`` is true, ``reward`` is ``task_completion`` (None for an episode left out of
  training: a simulator failure, a flagged user mistake), and ``record`` is the episode record
  (:class:`~rewardkit.envs.episode_record.EpisodeRecord`, ms-swift's ``rollout_infos``).

The user simulator, the rollout limits and the user review come from ``$REWARDKIT_CONFIG`` (``user_sim:`` and
``rollout:``), as in the ``simulated_user`` scheduler; a flagged user mistake is excluded by default.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from pydantic import Field

from rewardkit.envs import Domain
from rewardkit.envs.outcomes import checked_task, task_check
from rewardkit.envs.registry import get_domain
from rewardkit.envs.tasks import TaskError, task_digest
from rewardkit.envs.termination import Termination
from rewardkit.loop.agents import AgentReply
from rewardkit.loop.config import RolloutLimits, load_run_config
from rewardkit.loop.drive import Conversation
from rewardkit.loop.user_review import ModelReviewer, make_reviewer
from rewardkit.loop.user_sim import UserSimulator, make_simulator
from rewardkit.rewards import TaskCompletion

MAX_SESSIONS = 64
IDLE_S = 600.0


class AgentTurn(Action):
    """The agent's message: its text (Hermes ``<tool_call>`` blocks included) and any OpenAI-shaped tool calls; how
    its generation finished (``length``: cut off, its calls not run) and its token count (the token budget). ``end``:
    an ending the trainer imposes (``max_turns``, its own turn limit; ``agent_error``, its endpoint failed), applied
    after the message if the episode is still open; with no content and no calls, applied at once."""

    content: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    n_tokens: int = 0
    end: Literal["max_turns", "agent_error"] | None = None


class EpisodeObservation(Observation):
    """What the agent sees next: the messages to append to its conversation; at reset the tools too; at the end
    the episode's record."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    task_id: str | None = None
    termination: str | None = None
    record: dict[str, Any] | None = None


class EpisodeState(State):
    """The session's episode: its task and how it ended (None while it runs)."""

    task_id: str | None = None
    termination: str | None = None


@dataclasses.dataclass(frozen=True)
class Served:
    """What every session of one server shares: the domain, its simulator and reviewer, the limits, and the ids of
    the tasks it can score (the others are refused at reset, naming why)."""

    ref: str
    domain: Domain
    simulator: UserSimulator
    reviewer: ModelReviewer | None
    limits: RolloutLimits
    playable: frozenset[str]

    def task(
        self, task_id: str | None, split: str | None, seed: int | None, digest: str | None = None
    ) -> Mapping[str, Any]:
        """The task by id (``digest``: the caller's :func:`~rewardkit.envs.tasks.task_digest` of it, which must be
        this server's), else one drawn by ``seed`` from the playable tasks of ``split`` (default: all)."""
        tasks = self.domain.tasks()
        if task_id is not None:
            if str(task_id) not in tasks:
                raise TaskError(f"reset: no task {task_id!r} in domain {self.domain.name!r}")
            task = tasks[str(task_id)]
            if digest is not None and digest != (ours := task_digest(task)):
                raise TaskError(
                    f"reset: task {task_id!r} is not the caller's: its sha256 is {ours[:12]} here and "
                    f"{str(digest)[:12]} there; serve the domain the caller's dataset was built from"
                )
            return checked_task(task, f"reset task {task_id}", self.ref)
        splits = self.domain.splits()
        if split is not None and split not in splits:
            raise TaskError(f"reset: no split {split!r} in domain {self.domain.name!r}; splits: {sorted(splits)}")
        ids = sorted(set(splits[split] if split is not None else tasks) & self.playable)
        if not ids:
            raise TaskError(f"reset: no playable task in split {split!r} of domain {self.domain.name!r}")
        return tasks[random.Random(seed).choice(ids)]


class DomainEnvironment(Environment[AgentTurn, EpisodeObservation, EpisodeState]):
    """One session: at most one episode open at a time. Bound to a server by :func:`environment_class`."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    served: ClassVar[Served]
    _reward: ClassVar[TaskCompletion]

    def __init__(self) -> None:
        super().__init__()
        self._conversation: Conversation | None = None
        self._task: Mapping[str, Any] = {}
        self._state = EpisodeState()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        split: str | None = None,
        user_review: Literal["exclude", "count", "off"] | None = None,
        task_sha256: str | None = None,
        **kwargs: Any,
    ) -> EpisodeObservation:
        """``user_review``: what a flagged episode does here (the caller's mode: a trainer excludes, an evaluation
        counts); default the server's ``rollout.user_review``, else ``exclude``. ``task_sha256``: the caller's digest
        of the task it names; a task this server holds otherwise is refused."""
        self.close()
        served = self.served
        if user_review not in (None, "exclude", "count", "off"):
            raise ValueError(f"reset: user_review must be exclude, count or off, got {user_review!r}")
        limits = served.limits if user_review is None else dataclasses.replace(served.limits, user_review=user_review)
        self._task = served.task(task_id, split, seed, task_sha256)
        self._conversation = Conversation.start(
            served.domain, self._task, served.simulator, limits, reviewer=served.reviewer
        )
        tid = str(self._task.get("id"))
        self._state = EpisodeState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=tid)
        observation = EpisodeObservation(
            messages=list(self._conversation.messages), tools=served.domain.tool_specs(), task_id=tid
        )
        return self._ended(observation) if self._conversation.done else observation

    def step(self, action: AgentTurn, timeout_s: float | None = None, **kwargs: Any) -> EpisodeObservation:
        conversation = self._conversation
        if conversation is None or conversation.done:
            raise RuntimeError("no episode is open in this session: reset first (an ended episode needs a reset)")
        seen = len(conversation.messages)
        if action.content or action.tool_calls or action.end is None:  # an ending alone takes no turn
            reply = AgentReply(action.content, action.tool_calls or None, action.finish_reason, action.n_tokens)
            conversation.step(reply)
            seen += 1  # the agent's own message is the caller's: only what answers it goes back
        if action.end is not None and not conversation.done:
            assert conversation.episode is not None  # an open conversation has its episode
            conversation.episode.end(Termination(action.end))
        self._state.step_count += 1
        observation = EpisodeObservation(messages=conversation.messages[seen:], task_id=self._state.task_id)
        return self._ended(observation) if conversation.done else observation

    def _ended(self, observation: EpisodeObservation) -> EpisodeObservation:
        """The final observation: the reward, the record; the session's database is released."""
        assert self._conversation is not None
        result = self._conversation.result()
        infos = result.infos
        score = self._reward(
            [""],
            messages=[result.messages],
            task=[self._task],
            domain=[self.served.ref],
            rollout_infos=[infos],
        )[0]
        self._state.termination = infos.termination
        self.close()
        return observation.model_copy(
            update={"done": True, "reward": score, "termination": infos.termination, "record": infos.to_json()}
        )

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        if self._conversation is not None:
            self._conversation.close()
            self._conversation = None


def environment_class(ref: str) -> type[DomainEnvironment]:
    """The environment class serving domain ``ref`` (a built-in name, a path, an entry point), its simulator and
    limits from ``$REWARDKIT_CONFIG``: a bad config or domain fails here, before the server listens."""
    cfg = load_run_config()
    domain = get_domain(ref)
    # The episodes run here: a server never forwards them to other servers (rollout.env_servers is the trainer's).
    limits = dataclasses.replace(cfg.rollout, user_review=cfg.rollout.user_review or "exclude", env_servers=())
    playable = frozenset(tid for tid, task in domain.tasks().items() if task_check(task, ref) is None)
    simulator, reviewer = make_simulator(cfg.user_sim, domain), make_reviewer(cfg.user_sim)
    served = Served(ref, domain, simulator, reviewer, limits, playable)
    name = "".join(part.capitalize() for part in domain.name.replace("-", "_").split("_")) + "Environment"
    return type(name, (DomainEnvironment,), {"served": served, "_reward": TaskCompletion()})


def create_app(ref: str, max_sessions: int = MAX_SESSIONS, idle_s: float = IDLE_S) -> Any:
    """The OpenEnv FastAPI app serving ``ref``: ``max_sessions`` at once, each closed after ``idle_s`` idle."""
    from openenv.core.env_server.types import ConcurrencyConfig

    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_s)
    app = create_fastapi_app(environment_class(ref), AgentTurn, EpisodeObservation, concurrency_config=config)
    # An episode is a session (/ws): the stateless HTTP routes would build a database copy per request, outside the
    # session cap, and throw it away.
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) not in ("/reset", "/step", "/state")]
    return app
