"""ms-swift plugin entry: live GRPO diagnostics in ms-swift's own metrics.

    swift rlhf ... --external_plugins plugins/diagnostics.py --callbacks rewardkit_diagnostics

Registers the ``rewardkit_diagnostics`` trainer callback in ms-swift's ``callbacks_map`` (the mechanism of 4.4 and
4.6 alike). When training starts it wraps each reward function of the trainer, to time its calls and count its None
scores; at the end of each step it reads the step's scores from the trainer's own reward log (``_logs['rewards']``,
gathered over the processes, in GRPO's group order) and adds to ms-swift's metrics, which reach ``logging.jsonl``,
TensorBoard and wandb as its own do:

- ``rewardkit/groups/zero_variance``, ``rewardkit/groups/all_correct``, ``rewardkit/groups/all_wrong``: the group
  shares on the weighted total (:mod:`rewardkit.rewards.groups`);
- ``rewardkit/<Reward>/none_rate`` and ``rewardkit/<Reward>/latency_ms``: per reward, per call;
- ``rewardkit/diagnostics/ms``: what the end-of-step figures cost, per step;
- in multi-turn runs, from the episodes' ``rollout_infos`` (which every reward receives):
  ``rewardkit/episodes/excluded``, ``rewardkit/episodes/max_turns`` and ``rewardkit/episodes/user_flagged`` (the
  user review's flags: :mod:`rewardkit.loop.user_review`) as shares of the step's episodes, with a simulator that
  errs on purpose (``user_sim.fault_rate``) ``rewardkit/episodes/user_sim_wrong_zero`` (its mistakes left in the
  advantages and scored 0 by the first reward), and ``rewardkit/episodes/tool_errors`` (per episode); each
  step's whole summary (turns, endings, calls and errors per tool, policy tokens, a faulty simulator's labels:
  :mod:`rewardkit.loop.rollouts`) is appended to ``rollouts.jsonl`` in the output folder, where
  ``rewardkit audit`` reads it, with the step's calls of each model endpoint of the process (the user simulator's
  ledger, :mod:`rewardkit.loop.ledger`; metrics ``rewardkit/user/requests``, ``.../failures``, ``.../cache_hits``,
  ``.../prompt_tokens``, ``.../completion_tokens``, ``.../latency_p50_s``). A rollout server in another process
  keeps its own ledger: only colocated simulators are seen here.

Thresholds come from the ``diagnostics:`` section of ``$REWARDKIT_CONFIG``: above a ``*_warn`` share a warning is
logged; above a ``*_stop`` share ``patience`` steps in a row the run stops with :class:`DiagnosticsStop`, whose
message says what happened, since which step, and which key sets the threshold. Loading it twice is harmless.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from swift.callbacks import TrainerCallback, callbacks_map
from swift.utils import get_logger

from rewardkit.loop.config import DiagnosticsLimits, load_run_config
from rewardkit.loop.ledger import START, Ledger, Mark, ledgers
from rewardkit.loop.rollouts import FILE, summarize_rollouts
from rewardkit.rewards.groups import group_shares

KEY = "rewardkit_diagnostics"
PREFIX = "rewardkit"
logger = get_logger()


class DiagnosticsStop(RuntimeError):
    """A diagnostics threshold was passed ``patience`` steps in a row: the run cannot learn as it is."""


class Timed:
    """A reward function that records, per call, its latency and the share of None it returned."""

    def __init__(
        self,
        func: Callable[..., Any],
        name: str,
        metrics: Callable[[], dict[str, list[float]]],
        episodes: Callable[[Any, list[Any]], None] | None = None,
    ) -> None:
        self.func, self.name, self.metrics, self.episodes = func, name, metrics, episodes
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        scores = self.func(*args, **kwargs)
        metrics = self.metrics()
        metrics[f"{PREFIX}/{self.name}/latency_ms"].append((time.perf_counter() - start) * 1000)
        values = list(scores)
        if self.episodes is not None and kwargs.get("rollout_infos"):
            self.episodes(kwargs["rollout_infos"], values)
        metrics[f"{PREFIX}/{self.name}/none_rate"].append(sum(v is None for v in values) / max(len(values), 1))
        return scores

    def __getattr__(self, name: str) -> Any:  # the wrapped reward's own attributes (ms-swift probes a few)
        return getattr(self.func, name)


class Diagnostics(TrainerCallback):
    """The callback: wraps the rewards at the start, adds the step's figures and checks the thresholds."""

    def __init__(self, args: Any, trainer: Any) -> None:
        super().__init__(args, trainer)
        self.limits = load_run_config().section(DiagnosticsLimits)
        self.over: dict[str, list[int]] = {}  # threshold -> the steps in a row above it
        self.infos: list[Any] = []  # the step's episodes, as the first reward saw them
        self.scores: list[Any] = []  # and its scores of them
        self.marks: dict[Ledger, Mark] = {}  # where each model endpoint's ledger stood at the last step's end

    def _metrics(self) -> dict[str, list[float]]:
        return self.trainer._metrics["train" if self.trainer.model.training else "eval"]

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        funcs = self.trainer.reward_funcs
        for i, (func, name) in enumerate(zip(funcs, self.trainer.reward_func_names, strict=True)):
            is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
            wrappable = callable(func) and not is_async
            if wrappable and not isinstance(func, Timed) and not hasattr(func, "parameters"):  # not a reward model
                funcs[i] = Timed(func, name, self._metrics, self._seen if i == 0 else None)

    def _seen(self, infos: Any, scores: list[Any]) -> None:
        self.infos.extend(infos)
        self.scores.extend(scores)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        self._step_end(state.global_step)
        self._metrics()[f"{PREFIX}/diagnostics/ms"].append((time.perf_counter() - start) * 1000)  # its own cost

    def _step_end(self, step: int) -> None:
        logged = self.trainer._logs["rewards"]
        names = [n for n in self.trainer.reward_func_names if len(logged.get(n, ()))]
        size = int(self.trainer.num_generations)
        if len(names) != len(self.trainer.reward_func_names) or len(logged[names[0]]) % size:
            return  # nothing scored yet, or an eval batch of another group size
        scores = np.array([list(logged[n]) for n in names], dtype=float).T
        weights = self.trainer.reward_weights.detach().cpu().numpy().astype(float)
        shares = group_shares(scores, weights, size)
        metrics = self._metrics()
        for key, value in shares.items():
            metrics[f"{PREFIX}/groups/{key}"].append(value)
        none = {n: float(np.isnan(scores[:, i]).mean()) for i, n in enumerate(names)}
        self._episodes(step, metrics)
        self._check(step, shares["zero_variance"], none)

    def _episodes(self, step: int, metrics: dict[str, list[float]]) -> None:
        summary = summarize_rollouts(self.infos, self.scores if len(self.scores) == len(self.infos) else None)
        self.infos.clear()
        self.scores.clear()
        summary["ledger"] = self._ledger(metrics)
        n = summary["episodes"]
        if not n:
            return
        metrics[f"{PREFIX}/episodes/excluded"].append(summary["excluded"] / n)
        metrics[f"{PREFIX}/episodes/max_turns"].append(summary["terminations"].get("max_turns", 0) / n)
        metrics[f"{PREFIX}/episodes/user_flagged"].append(summary["user_flagged"] / n)
        faults = summary.get("user_sim_faults")
        if faults and faults["trained_zero"] is not None:  # a simulator that errs on purpose: its mistakes scored 0
            metrics[f"{PREFIX}/episodes/user_sim_wrong_zero"].append(faults["trained_zero"] / n)
        metrics[f"{PREFIX}/episodes/tool_errors"].append(summary["tool_errors"] / n)
        if self.trainer.accelerator.is_main_process:
            with open(Path(self.args.output_dir) / FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": step, **summary}) + "\n")

    def _ledger(self, metrics: dict[str, list[float]]) -> list[dict[str, Any]]:
        """This step's calls of each model endpoint of the process (the user simulator's, in colocate mode)."""
        out = []
        for ledger in ledgers():
            window, self.marks[ledger] = ledger.window(self.marks.get(ledger, START))
            if not (window["requests"] or window["cache_hits"] or window["failures"]):
                continue
            out.append(window)
            for key in ("requests", "failures", "cache_hits", "prompt_tokens", "completion_tokens"):
                metrics[f"{PREFIX}/{ledger.role}/{key}"].append(window[key])
            if window["latency_s"]["p50"] is not None:
                metrics[f"{PREFIX}/{ledger.role}/latency_p50_s"].append(window["latency_s"]["p50"])
        return out

    def _check(self, step: int, zero_variance: float, none: dict[str, float]) -> None:
        limits = self.limits
        checks = [
            (
                "zero_variance",
                "of the groups had no variance in the total reward (no advantage, no gradient)",
                zero_variance,
                limits.zero_variance_warn,
                limits.zero_variance_stop,
            )
        ]
        checks += [
            (
                f"none_rate.{n}",
                f"of the completions got None from {n}",
                rate,
                limits.none_rate_warn,
                limits.none_rate_stop,
            )
            for n, rate in none.items()
        ]
        for name, what, value, warn, stop in checks:
            if value > warn:
                logger.warning(f"rewardkit diagnostics, step {step}: {value:.0%} {what}")
            run = self.over.setdefault(name, [])
            run[:] = [*run, step] if stop is not None and value > stop else []
            if len(run) >= limits.patience:
                key = "zero_variance_stop" if name == "zero_variance" else "none_rate_stop"
                raise DiagnosticsStop(
                    f"rewardkit diagnostics stopped the run at step {step}: {value:.0%} {what}, above "
                    f"diagnostics.{key} = {stop:g} for {len(run)} steps in a row (since step {run[0]}); fix the "
                    f"rewards or the data, or raise diagnostics.{key} in $REWARDKIT_CONFIG"
                )


def register() -> None:
    current = callbacks_map.get(KEY)
    if current is not None and current.__qualname__ != Diagnostics.__qualname__:
        raise ValueError(f"callbacks_map[{KEY!r}] already holds {current!r}; refusing to replace it")
    callbacks_map[KEY] = Diagnostics


register()
