"""`rewardkit recipe run planning`: build → SFT → GRPO for the merchant planner.

Stages: ``model`` (tiny preset: build the offline tiny Qwen3), ``build`` (datasets
from the teacher and annotated records), ``sft``, ``eval_sft`` (test-split rewards
of the base and the SFT model), ``grpo``, ``grpo_base`` (with ``--baseline``: the
same GRPO from the untrained model, and ``grpo_control``: the same GRPO from the SFT
model with a learning rate of 1e-12, which sees the same prompts in the same order
but learns nothing) and ``summary``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.data_builders import InputSpec, write_jsonl
from rewardkit.files.jsonl import read_jsonl
from rewardkit.files.outputs import atomic_write_text, atomic_writer
from rewardkit.pipelines.chain import (
    TINY_MODEL,
    Chain,
    ChainOptions,
    ChainPreset,
    marker_path,
    marker_value,
)
from rewardkit.pipelines.stages import (
    SWIFT,
    BrokenOutput,
    Context,
    PipelineError,
    Stage,
    StageError,
    check_jsonl,
)
from rewardkit.recipes import EXAMPLES
from rewardkit.runs.scoring import score_rows

__all__ = ["TINY_MODEL", "CorpusError", "Options", "PlanningPipeline", "planning_corpus"]

PRESETS = {
    "tiny": ChainPreset("planning/tiny_sft.yaml", "planning/tiny_grpo.yaml", "planning/tiny_reward_config.yaml", True),
    "full": ChainPreset("planning/sft.yaml", "planning/grpo.yaml", "planning/reward_config.yaml", False),
}


@dataclass(frozen=True)
class Options(ChainOptions):
    data: Path = EXAMPLES  # the packaged copy of examples/planning: no checkout or cwd needed
    eval_rows: int | None = None
    max_new_tokens: int = 160


class CorpusError(ValueError):
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

    def stages(self) -> list[Stage]:
        stages = [Stage("model", self.model, self.check_model)] if self.preset.tiny else []
        stages += [Stage("build", self.build, self.check_build), Stage("sft", self.sft, self.check_sft)]
        stages += [Stage("eval_sft", self.eval_sft, self.check_eval), Stage("grpo", self.grpo, self.check_grpo)]
        if self.opts.baseline:
            stages += [Stage(name, getattr(self, name), self.check_grpo) for name in ("grpo_base", "grpo_control")]
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

    def _evaluate(self, ctx: Context, model: str, name: str) -> dict[str, float]:
        test = read_jsonl(ctx.workdir / "data" / "test.jsonl")[: self.opts.eval_rows]
        path = ctx.workdir / "eval" / f"{name}.input.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(path) as f:
            write_jsonl(test, f)
        result = ctx.workdir / "eval" / f"{name}.jsonl"
        result.unlink(missing_ok=True)
        ctx.run(f"eval_{name}", [SWIFT, "infer", "--model", model, "--val_dataset", str(path),
                                 "--result_path", str(result), "--infer_backend", "transformers",
                                 "--max_new_tokens", str(self.opts.max_new_tokens), "--temperature", "0",
                                 "--max_batch_size", "16", "--enable_thinking", "true"])  # fmt: skip
        responses = [r["response"] for r in read_jsonl(result)]
        rows = [
            {"completion": c, "solution": t["solution"], "experts": t["experts"]}
            for c, t in zip(responses, test, strict=True)
        ]
        table = score_rows(rows)
        means = dict(zip(table.keys, table.means(), strict=True))
        means["weighted"] = table.mean_total()
        return means

    def eval_sft(self, ctx: Context) -> dict[str, Any]:
        return {"base": self._evaluate(ctx, self.base_model(ctx), "base"),
                "sft": self._evaluate(ctx, ctx.results["sft"]["checkpoint"], "sft")}  # fmt: skip

    def grpo_base(self, ctx: Context) -> dict[str, Any]:
        return self.run_grpo(ctx, "grpo_base", self.base_model(ctx))

    def summary(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.grpo_log import grpo_steps, plot, summarize_steps, think_lengths

        evals = {k: ctx.results["eval_sft"][k] for k in ("base", "sft")}
        report: dict[str, Any] = {"preset": self.opts.preset, "eval": evals}
        for stage in ("grpo", "grpo_base", "grpo_control"):
            if stage not in ctx.results:
                continue
            run = Path(ctx.results[stage]["run_dir"])
            steps = grpo_steps(run / "logging.jsonl")
            report[stage] = summarize_steps(steps)
            png = plot(steps, think_lengths(run / "completions.jsonl"), ctx.workdir / f"{stage}_curves.png",
                       f"planning {self.opts.preset}: {stage}")  # fmt: skip
            report[stage]["plot"] = str(png)
        atomic_write_text(ctx.workdir / "summary.json", json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        return {"summary": str(ctx.workdir / "summary.json")}

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
        for name in ("base", "sft"):
            if not isinstance(result.get(name), Mapping) or "weighted" not in result[name]:
                raise BrokenOutput(f"its marker has no {name!r} scores")

    def summary_lacks(self, summary: Mapping[str, Any]) -> str | None:
        return None if "eval" in summary else "has no 'eval' section"
