"""`rewardkit recipe run planning`: build → SFT → GRPO for the merchant planner.

Stages: ``model`` (tiny preset: build the offline tiny Qwen3), ``build`` (datasets
from the teacher and annotated records), ``sft``, the GRPO runs from the SFT model
(``grpo``; with ``--baseline`` also ``grpo_control``, the same GRPO at a learning rate
of 1e-12, which sees the same prompts in the same order but learns nothing, and
``grpo_base``, the same GRPO from the untrained model; with ``--sign-test``
``grpo_inverted``, the same GRPO on the negated weighted reward; with ``--seeds N``
each run again under the next seeds, ``grpo_s2``, ...), one ``eval_<model>`` stage per
model (base, SFT, every GRPO run from SFT: greedy and sampled, on a slice of the
training rows and on the test split; see :mod:`rewardkit.pipelines.planning_report`),
and ``summary``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardkit.data_builders import InputSpec, write_jsonl
from rewardkit.errors import UserError
from rewardkit.files.jsonl import read_jsonl
from rewardkit.files.outputs import atomic_writer
from rewardkit.pipelines.chain import (
    TINY_MODEL,
    Chain,
    ChainOptions,
    ChainPreset,
    GrpoRun,
    marker_path,
    marker_value,
)
from rewardkit.pipelines.evidence import model_kinds
from rewardkit.pipelines.stages import (
    BrokenOutput,
    Context,
    PipelineError,
    Stage,
    StageError,
    check_jsonl,
)
from rewardkit.recipes import EXAMPLES, recipe_path

if TYPE_CHECKING:
    from rewardkit.rewards.config import RewardConfig

__all__ = ["TINY_MODEL", "CorpusError", "Options", "PlanningPipeline", "planning_corpus"]

PRESETS = {
    "tiny": ChainPreset("planning/tiny_sft.yaml", "planning/tiny_grpo.yaml", "planning/tiny_reward_config.yaml", True),
    "full": ChainPreset("planning/sft.yaml", "planning/grpo.yaml", "planning/reward_config.yaml", False),
}


@dataclass(frozen=True)
class Options(ChainOptions):
    data: Path = EXAMPLES  # the packaged copy of examples/planning: no checkout or cwd needed
    eval_rows: int | None = 40  # the first N test rows, and as many GRPO training rows
    eval_samples: int = 8  # sampled completions per prompt, sampled as the GRPO recipe's rollouts
    max_new_tokens: int = 160


class CorpusError(UserError, ValueError):
    """The tokenizer corpus directory is missing or holds no text."""


def planning_corpus(data: Path = EXAMPLES) -> list[str]:
    """Texts for the tiny model's tokenizer: rendered prompts, queries, targets, messages.

    An empty corpus raises: a tokenizer trained on nothing is bytes only (261 tokens), and a model
    built on it trains and scores without a word of complaint, just badly.
    """
    from rewardkit.data_builders import PromptTemplate

    if not data.is_dir():
        raise CorpusError(f"--data {data}: not a directory of *.jsonl files for the tokenizer corpus")
    files = sorted(data.glob("*.jsonl"))
    if not files:
        raise CorpusError(f"--data {data}: no *.jsonl files for the tokenizer corpus")
    prompt = PromptTemplate()
    texts: list[str] = []
    for path in files:
        for row in read_jsonl(path):
            if "experts" in row and "query" in row:
                texts += [prompt.render(row), str(row["query"])]
            texts += [str(row[k]) for k in ("output", "rewrite", "completion", "solution") if k in row]
            messages = row.get("messages")
            if isinstance(messages, list):
                texts += [str(m.get("content", "")) for m in messages if isinstance(m, dict)]
    if not any(t.strip() for t in texts):
        raise CorpusError(f"--data {data}: the *.jsonl files hold no text for the tokenizer corpus")
    return texts


class PlanningPipeline(Chain):
    def __init__(self, opts: Options) -> None:
        super().__init__(opts, PRESETS)
        self.opts: Options = opts
        self.data = opts.data.resolve()
        # Checked now, not when the build stage comes after minutes of model building.
        needed = ("teacher_*.jsonl", "annotated_p*.jsonl", "annotated_test.jsonl")
        missing = [pattern for pattern in needed if not any(self.data.glob(pattern))]
        if missing:
            raise PipelineError(f"--data {self.data}: no {', '.join(missing)} there (teacher and annotated records)")
        if opts.eval_samples < 1 or (opts.eval_rows is not None and opts.eval_rows < 1):
            raise PipelineError("--eval-rows and --eval-samples need at least 1")
        self.kinds = model_kinds(self.grpo_runs)

    def stages(self) -> list[Stage]:
        stages = [Stage("model", self.model, self.check_model)] if self.preset.tiny else []
        stages += [Stage("build", self.build, self.check_build), Stage("sft", self.sft, self.check_sft)]
        stages += self.grpo_stages()
        if self.opts.baseline:  # the same GRPO from the untrained model: what SFT is for
            stages.append(Stage("grpo_base", self.grpo_base, self.check_grpo))
        stages += [Stage(f"eval_{m}", self._eval_stage(m), self.check_eval) for m in self.kinds]
        return [*stages, Stage("summary", self.summary, self.check_summary)]

    # -- stages ---------------------------------------------------------------------------------
    def model(self, ctx: Context) -> dict[str, Any]:
        return {**self.build_model(ctx, planning_corpus(self.data)), "data": str(self.data)}

    def build(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
        from rewardkit.data_builders.planning.sft import SftOptions, build_sft

        out = ctx.workdir / "data"
        out.mkdir(parents=True, exist_ok=True)
        teacher = [InputSpec(p, None) for p in sorted(self.data.glob("teacher_*.jsonl"))]
        annotated = [InputSpec(p, None) for p in sorted(self.data.glob("annotated_p*.jsonl"))]
        test = [InputSpec(self.data / "annotated_test.jsonl", None)]
        if not teacher or not annotated or not test[0].path.is_file():
            raise StageError(f"{self.data} needs teacher_*.jsonl, annotated_p*.jsonl and annotated_test.jsonl")
        reports = {}
        for name, (rows, report) in {
            "sft": build_sft(teacher, SftOptions(think_min=20, think_max=200)),
            "grpo": build_grpo(annotated, GrpoOptions()),
            "test": build_grpo(test, GrpoOptions()),
        }.items():
            with atomic_writer(out / f"{name}.jsonl") as f:  # a killed run never leaves a torn file
                write_jsonl(rows, f)
            reports[name] = report.as_dict()
            print(f"[build] {name}: {report.render()}", file=ctx.echo)
        return {"dir": str(out), "data": str(self.data), "reports": reports}

    def checkpoint(self, ctx: Context, model: str) -> str:
        return self.base_model(ctx) if model == "base" else ctx.results[model]["checkpoint"]

    def reward_config(self) -> RewardConfig:
        """The GRPO runs' ``$REWARDKIT_CONFIG``, read as the rewards read it (checked; the preset's file only)."""
        from rewardkit.rewards.config import load_config

        return load_config(path=recipe_path(self.preset.grpo_config))

    def _eval_stage(self, model: str):  # returns a Stage.run callable
        def run(ctx: Context) -> dict[str, Any]:
            from rewardkit.pipelines.planning_report import evaluate_model

            data, n = ctx.workdir / "data", self.opts.eval_rows
            sets = {"train": read_jsonl(data / "grpo.jsonl")[:n], "test": read_jsonl(data / "test.jsonl")[:n]}
            return evaluate_model(
                ctx,
                model,
                self.checkpoint(ctx, model),
                sets,
                samples=self.opts.eval_samples,
                sampling=self.grpo_sampling(ctx),
                max_new_tokens=self.opts.max_new_tokens,
                config=self.reward_config(),
            )

        return run

    def grpo_base(self, ctx: Context) -> dict[str, Any]:
        return self.run_grpo(ctx, GrpoRun("grpo_base", "grpo", self.grpo_runs[0].seed), self.base_model(ctx))

    def summary(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.planning_report import write_summary
        from rewardkit.rewards.think_length import ThinkLengthConfig

        band = self.reward_config().section(ThinkLengthConfig)
        path = write_summary(ctx, self.opts.preset, self.kinds, (band.min, band.max))
        return {"summary": str(path)}

    # -- output checks (the model, SFT, GRPO and summary ones are the chain's) --------------------------------
    def _same_data(self, result: Mapping[str, Any]) -> None:
        made_from = marker_value(result, "data")
        if made_from != str(self.data):
            raise BrokenOutput(f"made from {made_from}, but this run reads --data {self.data}")

    def check_model(self, ctx: Context, result: Mapping[str, Any]) -> None:
        self._same_data(result)
        super().check_model(ctx, result)

    def check_build(self, ctx: Context, result: Mapping[str, Any]) -> None:
        self._same_data(result)
        reports = marker_value(result, "reports")
        for name in ("sft", "grpo", "test"):
            rows = check_jsonl(marker_path(result, "dir") / f"{name}.jsonl")
            written = (reports.get(name) or {}).get("written")
            if written not in (None, rows):
                raise BrokenOutput(f"{name}.jsonl has {rows} rows, the build wrote {written}")

    def check_eval(self, ctx: Context, result: Mapping[str, Any]) -> None:
        check_jsonl(marker_path(result, "scores"))
        figures = marker_value(result, "means")
        for mode in ("greedy", "sampled"):
            for split in ("train", "test"):
                if "weighted" not in figures.get(mode, {}).get(split, {}):
                    raise BrokenOutput(f"its marker has no {mode} {split} scores")

    def summary_lacks(self, summary: Mapping[str, Any]) -> str | None:
        models = summary.get("models")
        missing = [m for m in self.kinds if not isinstance(models, Mapping) or m not in models]
        return f"lacks the model(s) {', '.join(missing)}" if missing else None
