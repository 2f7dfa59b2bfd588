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

In multi-turn runs it also shows a few of a step's episodes (``diagnostics.sample_episodes``, spread over the step's
episodes, at each logging step or every ``diagnostics.sample_every`` steps: :mod:`rewardkit.loop.episode_sample`)
in each tracker of the trainer's ``--report_to``, under ``rewardkit/episodes``: each episode's transcript, each
reward's score, the checks of the run's task-completion reward (a reward with ``row_checks``) and the line that says
why it scored so, as the episode viewer says it. TensorBoard gets them as a text summary (the trainer's own writer),
wandb as a ``wandb.Table`` on the active run. A tracker not in ``--report_to`` is never touched.

Thresholds come from the ``diagnostics:`` section of ``$REWARDKIT_CONFIG``: above a ``*_warn`` share a warning is
logged; above a ``*_stop`` share ``patience`` steps in a row the run stops with :class:`DiagnosticsStop`, whose
message says what happened, since which step, and which key sets the threshold. Loading it twice is harmless.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from swift.callbacks import TrainerCallback, callbacks_map
from swift.utils import get_logger

from rewardkit.loop.config import DiagnosticsLimits, load_run_config
from rewardkit.loop.episode_sample import TAG, Explainer, SampledEpisode, markdown, sample_episodes, table
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
        seen: Callable[[str, dict[str, Any], list[Any]], None] | None = None,
    ) -> None:
        self.func, self.name, self.metrics, self.seen = func, name, metrics, seen
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        scores = self.func(*args, **kwargs)
        metrics = self.metrics()
        metrics[f"{PREFIX}/{self.name}/latency_ms"].append((time.perf_counter() - start) * 1000)
        values = list(scores)
        if self.seen is not None and kwargs.get("rollout_infos"):
            self.seen(self.name, kwargs, values)
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
        self.rows: list[tuple[Any, Any, Any]] = []  # their messages, task and domain cells
        self.rewards: dict[str, list[Any]] = {}  # every reward's scores of them, by name
        self.trackers: list[Callable[[int, list[SampledEpisode]], None]] = []  # those of --report_to we show them in
        self.every = 1  # the steps between two samples of episodes
        self.due = True  # a sample is due: it goes with the next step's episodes
        self.marks: dict[Ledger, Mark] = {}  # where each model endpoint's ledger stood at the last step's end

    def _metrics(self) -> dict[str, list[float]]:
        return self.trainer._metrics["train" if self.trainer.model.training else "eval"]

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        funcs = self.trainer.reward_funcs
        for i, (func, name) in enumerate(zip(funcs, self.trainer.reward_func_names, strict=True)):
            is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
            wrappable = callable(func) and not is_async
            if wrappable and not isinstance(func, Timed) and not hasattr(func, "parameters"):  # not a reward model
                funcs[i] = Timed(func, name, self._metrics, self._seen)
        self.every = self.limits.sample_every or max(int(state.logging_steps or 1), 1)
        if self.limits.sample_episodes and self.trainer.accelerator.is_main_process:
            self.trackers = trackers(args, self.trainer)

    def _seen(self, name: str, columns: dict[str, Any], scores: list[Any]) -> None:
        infos = columns["rollout_infos"]
        if not isinstance(infos, list | tuple):  # not the trainer's column: nothing to show or count
            return
        if name == self.trainer.reward_func_names[0]:
            self.infos.extend(infos)
            self.scores.extend(scores)
            cells = [columns.get(c) or [None] * len(scores) for c in ("messages", "task", "domain")]
            if all(isinstance(c, list | tuple) and len(c) == len(infos) for c in cells):
                self.rows.extend(zip(*cells, strict=True))  # else the explainer is off for the step (rows != infos)
        self.rewards.setdefault(name, []).extend(scores)

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
        # A sample falls due every `every` steps and goes at the first step end with episodes from then on (a run
        # that generates every few steps has none at most step ends); the first comes with the first episodes.
        self.due = self.due or step % self.every == 0
        if self.trackers and self.infos and self.due:
            self.due = False
            self._show(step)
        summary = summarize_rollouts(self.infos, self.scores if len(self.scores) == len(self.infos) else None)
        self.infos.clear()
        self.scores.clear()
        self.rows.clear()
        self.rewards.clear()
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

    def _show(self, step: int) -> None:
        """The step's sample in each tracker. A tracker that fails (its disk, its service) or an episode the sample
        cannot read costs that sample, with a warning, never the run."""
        try:
            shown = sample_episodes(step, self.infos, self.rewards, self.limits.sample_episodes, self._explainer())
        except Exception as exc:  # the rows as the trainer handed them over: whatever they hold
            logger.warning(f"{KEY}: the episodes of step {step} were not shown: {type(exc).__name__}: {exc}")
            return
        for track in self.trackers:
            try:
                track(step, shown)
            except Exception as exc:  # the tracker's own failure
                logger.warning(f"{KEY}: {track} did not take the episodes of step {step}: {type(exc).__name__}: {exc}")

    def _explainer(self) -> Explainer | None:
        """The first reward of the run that says why it scored an episode (``row_checks``: TaskCompletion's), with
        its checks of the step's i-th episode."""
        funcs = zip(self.trainer.reward_funcs, self.trainer.reward_func_names, strict=True)
        found = next(((f.row_checks, name) for f, name in funcs if callable(getattr(f, "row_checks", None))), None)
        if found is None or len(self.rows) != len(self.infos):
            return None
        row_checks, name = found
        return name, lambda i: row_checks(*self.rows[i], self.infos[i])

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


def trackers(args: Any, trainer: Any) -> list[Callable[[int, list[SampledEpisode]], None]]:
    """What shows the sampled episodes in each tracker of ``args.report_to`` that has one: TensorBoard and wandb."""
    report = set(args.report_to or ())
    out: list[Callable[[int, list[SampledEpisode]], None]] = []
    if "tensorboard" in report:
        out.append(TensorBoard(args, trainer))
    if "wandb" in report:
        import wandb  # asked for: a missing package fails here (the trainer's own callback fails first)

        def to_wandb(step: int, shown: list[SampledEpisode]) -> None:
            if wandb.run is not None:  # the trainer's callback started it (on the main process)
                columns, rows = table(shown)
                wandb.run.log({TAG: wandb.Table(columns=columns, data=rows), "train/global_step": step})

        out.append(to_wandb)
    return out


class TensorBoard:
    """The sample as a text summary in the trainer's own TensorBoard writer (transformers' ``TensorBoardCallback``),
    else in a writer of this callback's own in the trainer's log folder."""

    def __init__(self, args: Any, trainer: Any) -> None:
        from transformers.integrations import TensorBoardCallback

        self.callbacks = [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TensorBoardCallback)]
        logging_dir = os.environ.get("TENSORBOARD_LOGGING_DIR") or getattr(args, "logging_dir", None)
        self.folder = logging_dir or str(Path(args.output_dir) / "runs")
        self.own: Any = None

    def __call__(self, step: int, shown: list[SampledEpisode]) -> None:
        writer = next((cb.tb_writer for cb in self.callbacks if cb.tb_writer is not None), None)
        if writer is None:
            if self.own is None:
                from torch.utils.tensorboard import SummaryWriter

                self.own = SummaryWriter(log_dir=self.folder)
            writer = self.own
        writer.add_text(TAG, markdown(shown), step)
        writer.flush()


def register() -> None:
    current = callbacks_map.get(KEY)
    if current is not None and current.__qualname__ != Diagnostics.__qualname__:
        raise ValueError(f"callbacks_map[{KEY!r}] already holds {current!r}; refusing to replace it")
    callbacks_map[KEY] = Diagnostics


register()
