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
from rewardkit.files.outputs import atomic_write_text, atomic_writer
from rewardkit.pipelines.stages import (
    SWIFT,
    BrokenOutput,
    Context,
    PipelineError,
    Stage,
    StageError,
    check_checkpoint,
    check_jsonl,
    check_model_dir,
    latest_run_dir,
    plugin_file,
    read_output,
    run_sft,
)
from rewardkit.recipes import EXAMPLES, recipe_path
from rewardkit.runs.scoring import read_jsonl, score_rows

# Big enough to learn the format in ~2 minutes of CPU SFT (hidden 128 learned it less reliably).
TINY_MODEL = {"vocab_size": 2048, "hidden_size": 256, "num_layers": 2}


@dataclass(frozen=True)
class Preset:
    sft: str
    grpo: str
    reward_config: str
    tiny: bool


PRESETS = {
    "tiny": Preset("planning/tiny_sft.yaml", "planning/tiny_grpo.yaml", "planning/tiny_reward_config.yaml", True),
    "full": Preset("planning/sft.yaml", "planning/grpo.yaml", "planning/reward_config.yaml", False),
}


@dataclass(frozen=True)
class Options:
    preset: str = "tiny"
    data: Path = EXAMPLES  # the packaged copy of examples/planning: no checkout or cwd needed
    model: str | None = None  # the base model of the full preset
    sft_steps: int | None = None
    grpo_steps: int | None = None
    eval_rows: int | None = None
    max_new_tokens: int = 160
    baseline: bool = False


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


def _path(result: Mapping[str, Any], key: str) -> Path:
    value = result.get(key)
    if not isinstance(value, str):
        raise BrokenOutput(f"its marker records no {key!r}")
    return Path(value)


class PlanningPipeline:
    def __init__(self, opts: Options) -> None:
        if opts.preset not in PRESETS:
            raise PipelineError(f"--preset: unknown {opts.preset!r}; choose from {sorted(PRESETS)}")
        self.opts = opts
        self.preset = PRESETS[opts.preset]
        if not self.preset.tiny and not opts.model:
            raise PipelineError("--model is required for the full preset (a local path or hub id of the base model)")
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

    def base_model(self, ctx: Context) -> str:
        return ctx.results["model"]["path"] if self.preset.tiny else str(self.opts.model)

    # -- stages ---------------------------------------------------------------------------------
    def model(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.tiny_model import build_tiny_model

        out = build_tiny_model(ctx.workdir / "tiny-model", planning_corpus(self.data), **TINY_MODEL)
        return {"path": str(out), "data": str(self.data), "vocab": check_model_dir(out)}

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

    def sft(self, ctx: Context) -> dict[str, Any]:
        dataset = ctx.workdir / "data" / "sft.jsonl"
        ckpt = run_sft(ctx, recipe_path(self.preset.sft), self.base_model(ctx), dataset, self.opts.sft_steps)
        return {"checkpoint": str(ckpt)}

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

    def _grpo(self, ctx: Context, model: str, out: Path, stage: str, *extra: str) -> dict[str, Any]:
        # The plugin's file form, absolute: it loads on every ms-swift whatever the cwd.
        plugin = plugin_file("rewardkit.rewards")
        cmd = [SWIFT, "rlhf", str(recipe_path(self.preset.grpo)), "--model", model,
               "--external_plugins", plugin, "--dataset", str(ctx.workdir / "data" / "grpo.jsonl"),
               "--output_dir", str(out), "--log_completions", "true"]  # fmt: skip
        if self.opts.grpo_steps:
            cmd += ["--max_steps", str(self.opts.grpo_steps)]
        ctx.run(stage, [*cmd, *extra], {"REWARDKIT_CONFIG": str(recipe_path(self.preset.reward_config))})
        return {"run_dir": str(latest_run_dir(out))}

    def grpo(self, ctx: Context) -> dict[str, Any]:
        return self._grpo(ctx, ctx.results["sft"]["checkpoint"], ctx.workdir / "grpo", "grpo")

    def grpo_base(self, ctx: Context) -> dict[str, Any]:
        return self._grpo(ctx, self.base_model(ctx), ctx.workdir / "grpo_base", "grpo_base")

    def grpo_control(self, ctx: Context) -> dict[str, Any]:
        # Later batches may simply hold easier prompts: the control tells that apart from learning.
        args = ("--learning_rate", "1e-12")
        return self._grpo(ctx, ctx.results["sft"]["checkpoint"], ctx.workdir / "grpo_control", "grpo_control", *args)

    def summary(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.grpo_log import grpo_steps, plot, summarize, think_lengths

        evals = {k: ctx.results["eval_sft"][k] for k in ("base", "sft")}
        report: dict[str, Any] = {"preset": self.opts.preset, "eval": evals}
        for stage in ("grpo", "grpo_base", "grpo_control"):
            if stage not in ctx.results:
                continue
            run = Path(ctx.results[stage]["run_dir"])
            steps = grpo_steps(run / "logging.jsonl")
            report[stage] = summarize(steps)
            png = plot(steps, think_lengths(run / "completions.jsonl"), ctx.workdir / f"{stage}_curves.png",
                       f"planning {self.opts.preset}: {stage}")  # fmt: skip
            report[stage]["plot"] = str(png)
        atomic_write_text(ctx.workdir / "summary.json", json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        return {"summary": str(ctx.workdir / "summary.json")}

    # -- output checks: run before a stage's marker is written, and before a marker is trusted on a rerun --
    def _same_data(self, result: Mapping[str, Any]) -> None:
        if result.get("data") not in (None, str(self.data)):
            raise BrokenOutput(f"made from {result['data']}, but this run reads --data {self.data}")

    def check_model(self, ctx: Context, result: Mapping[str, Any]) -> None:
        self._same_data(result)
        vocab = check_model_dir(_path(result, "path"))
        if result.get("vocab") not in (None, vocab):
            raise BrokenOutput(f"the tokenizer now has {vocab} tokens, {result['vocab']} when built")

    def check_build(self, ctx: Context, result: Mapping[str, Any]) -> None:
        self._same_data(result)
        reports = result.get("reports") or {}
        for name in ("sft", "grpo", "test"):
            rows = check_jsonl(_path(result, "dir") / f"{name}.jsonl")
            written = (reports.get(name) or {}).get("written")
            if written not in (None, rows):
                raise BrokenOutput(f"{name}.jsonl has {rows} rows, the build wrote {written}")

    def check_sft(self, ctx: Context, result: Mapping[str, Any]) -> None:
        check_checkpoint(_path(result, "checkpoint"))

    def check_eval(self, ctx: Context, result: Mapping[str, Any]) -> None:
        for name in ("base", "sft"):
            if not isinstance(result.get(name), Mapping) or "weighted" not in result[name]:
                raise BrokenOutput(f"its marker has no {name!r} scores")

    def check_grpo(self, ctx: Context, result: Mapping[str, Any]) -> None:
        from rewardkit.pipelines.grpo_log import grpo_steps

        log = _path(result, "run_dir") / "logging.jsonl"
        steps = read_output(log, grpo_steps)
        if not steps:
            raise BrokenOutput(f"{log} has no logged GRPO step")

    def check_summary(self, ctx: Context, result: Mapping[str, Any]) -> None:
        path = _path(result, "summary")
        summary = read_output(path, lambda p: json.loads(p.read_text(encoding="utf-8")))
        if not isinstance(summary, dict) or "eval" not in summary:
            raise BrokenOutput(f"{path} has no 'eval' section")
