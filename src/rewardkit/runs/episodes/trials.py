"""K trials of every task through the shared agent <-> user <-> database loop, into an episode log.

The engine under ``rewardkit synth`` and ``rewardkit eval``: :func:`run_trials` runs every (task, trial)
of a :class:`TrialPlan` that the log lacks, scores each finished episode (:mod:`rewardkit.runs.episodes.scorer`)
and appends it to the log (:mod:`rewardkit.runs.episodes.episode_log`) as soon as it ends. A run stopped by an
interrupt or a fault carries a hint saying how to resume it (:func:`resume_hint`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.envs import Domain
from rewardkit.loop.agents import Agent
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import EpisodeResult, run_episodes
from rewardkit.loop.endpoint import EndpointConfigError
from rewardkit.loop.ledger import Ledger
from rewardkit.loop.lockstep import episode_seed, run_lockstep
from rewardkit.loop.user_sim.base import UserSimulator
from rewardkit.runs.episodes.episode_log import EpisodeLog
from rewardkit.runs.episodes.progress import ProgressBar
from rewardkit.runs.episodes.scorer import Scorer

HINT = "rewardkit_resume_hint"  # the attribute of an exception that stopped run_trials: how to resume


def resume_hint(exc: BaseException) -> str | None:
    """What to tell the user about the episodes a stopped run kept, if ``exc`` stopped one."""
    return getattr(exc, HINT, None)


@dataclass(frozen=True)
class TrialPlan:
    domain: Domain
    tasks: Sequence[Mapping[str, Any]]
    trials: int
    make_agent: Callable[[Mapping[str, Any]], Agent]
    simulator: UserSimulator
    limits: RolloutLimits
    system: str | None = None  # None: the domain's policy
    workers: int = 8  # episodes in flight; with a local checkpoint, the conversations of one generation
    require_outputs: bool = True  # TaskCompletion's rule: tau2's (true) or MUA-RL's database-only (false)
    ledgers: tuple[Ledger, ...] = ()  # the model endpoints the run calls (agent, user): what they cost it
    price_per_mtok: tuple[float, float] | None = None  # USD per million prompt and completion tokens
    seed_base: int = 0  # the sampled trials' random stream (lockstep.episode_seed's base)

    def ledger(self) -> list[dict[str, Any]]:
        """Each endpoint's ledger of this process's calls, with its cost when a price is given."""
        return [ledger.summary(self.price_per_mtok) for ledger in self.ledgers]


def run_trials(plan: TrialPlan, log: EpisodeLog, progress: bool = True, label: str = "episodes") -> list[dict]:
    """Run every (task, trial) of the plan the log lacks, ``plan.workers`` at a time; return the plan's records
    (a log resumed with fewer tasks or trials keeps the others, but they are not this run's)."""
    scorer = Scorer(plan.domain.name, plan.require_outputs)
    done = log.done()
    keys = {(str(t["id"]), k) for t in plan.tasks for k in range(plan.trials)}
    todo = [(t, k) for t in plan.tasks for k in range(plan.trials) if (str(t["id"]), k) not in done]

    with ProgressBar(len(todo), len(done), label, progress) as advance:

        def logged(i: int, result: EpisodeResult) -> None:
            task, trial = todo[i]
            record = scorer.record(result, task, trial, log.run)
            log.append(record)
            advance(record)

        tasks = [task for task, _ in todo]
        limits, workers = plan.limits, plan.workers
        batch_agent = getattr(plan.make_agent, "batch", None)
        try:
            if batch_agent is not None:  # common random numbers: trial k of a task is seeded alike for every model
                seeds = [episode_seed(str(task["id"]), trial, plan.seed_base) for task, trial in todo]
                run_lockstep(
                    plan.domain, tasks, batch_agent, plan.simulator, limits, seeds, workers, plan.system, logged
                )
            else:
                run_episodes(plan.domain, tasks, plan.make_agent, plan.simulator, limits, workers, plan.system, logged)
        except EndpointConfigError:  # a wrong model name or key: the same command cannot resume, fix the options
            raise
        except BaseException as exc:  # interrupted, or a fault: every finished episode is in the log already
            with contextlib.suppress(AttributeError):  # for the command to say (the agent chain reruns a stage whole)
                setattr(exc, HINT, log.resume_hint())
            raise
    return [r for r in log.records() if (r["task_id"], r["trial"]) in keys]
