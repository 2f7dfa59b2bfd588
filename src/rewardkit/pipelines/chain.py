"""The skeleton both `recipe run` chains (planning, tau2) are built on.

A chain has options and a preset, checked before any stage runs; on the tiny preset it builds the
offline tiny Qwen3 (one size, :data:`TINY_MODEL`) and trains it on CPU; it runs the SFT, then GRPO
from a model, and with ``--baseline`` the no-learning control: the same GRPO at a learning rate of
1e-12 (:data:`NO_LEARNING`), which sees the same prompts in the same order and learns nothing. The
output checks of those stages live here too; a marker that lacks a key fails its check naming the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.pipelines.stages import (
    SWIFT,
    BrokenOutput,
    Context,
    PipelineError,
    check_checkpoint,
    check_model_dir,
    last_checkpoint,
    latest_run_dir,
    plugin_file,
    read_output,
    run_sft,
)
from rewardkit.recipes import recipe_path

# Big enough to learn the format in ~2 minutes of CPU SFT (hidden 128 learned it less reliably).
TINY_MODEL = {"vocab_size": 2048, "hidden_size": 256, "num_layers": 2}
# The control's learning rate: every step runs, nothing moves.
NO_LEARNING = ("--learning_rate", "1e-12")


@dataclass(frozen=True)
class ChainPreset:
    sft: str  # the SFT recipe, under recipes/
    grpo: str  # the GRPO recipe
    grpo_config: str  # REWARDKIT_CONFIG of the GRPO runs (rewards; tau2: the simulator and the loop too)
    tiny: bool  # build the offline tiny Qwen3 as the base model


@dataclass(frozen=True)
class ChainOptions:
    preset: str = "tiny"
    model: str | None = None  # the base model of the full preset: a local path or hub id
    sft_steps: int | None = None
    grpo_steps: int | None = None
    baseline: bool = False  # also the control runs


def marker_value(result: Mapping[str, Any], key: str) -> Any:
    """``result[key]``; BrokenOutput naming the key when the marker does not record it."""
    if result.get(key) is None:
        raise BrokenOutput(f"its marker records no {key!r}")
    return result[key]


def marker_path(result: Mapping[str, Any], key: str) -> Path:
    """The path a marker records under ``key``; BrokenOutput naming the key when there is none."""
    value = result.get(key)
    if not isinstance(value, str):
        raise BrokenOutput(f"its marker records no {key!r}")
    return Path(value)


def recipe_saves(recipe: Path) -> bool:
    """Whether ``swift`` running ``recipe`` leaves a checkpoint: unless ``save_strategy`` is ``no``,
    ms-swift saves at the last step (its DefaultFlowCallbackNew), whatever ``--max_steps`` says."""
    import yaml

    config = yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}
    return str(config.get("save_strategy", "steps")).lower() not in ("no", "false")  # YAML reads bare no as False


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class Chain:
    """What both chains do alike. A chain lists its stages; these are the methods they share."""

    grpo_plugins: tuple[str, ...] = ("rewardkit.rewards",)  # modules ms-swift loads for GRPO (their files)

    def __init__(self, opts: ChainOptions, presets: Mapping[str, ChainPreset]) -> None:
        if opts.preset not in presets:
            raise PipelineError(f"--preset: unknown {opts.preset!r}; choose from {sorted(presets)}")
        self.opts, self.preset = opts, presets[opts.preset]
        if not self.preset.tiny and not opts.model:
            raise PipelineError("--model is required for the full preset (a local path or hub id of the base model)")

    def base_model(self, ctx: Context) -> str:
        return ctx.results["model"]["path"] if self.preset.tiny else str(self.opts.model)

    # -- stages ---------------------------------------------------------------------------------
    def build_model(self, ctx: Context, corpus: Iterable[str], **sizes: int) -> dict[str, Any]:
        """The tiny model's stage: a tokenizer trained on ``corpus``, a random Qwen3 of TINY_MODEL's size
        (``sizes`` add to it, e.g. ``max_positions``)."""
        from rewardkit.pipelines.tiny_model import build_tiny_model

        out = build_tiny_model(ctx.workdir / "tiny-model", corpus, **{**TINY_MODEL, **sizes})
        return {"path": str(out), "vocab": check_model_dir(out)}

    def sft(self, ctx: Context) -> dict[str, Any]:
        dataset = ctx.workdir / "data" / "sft.jsonl"
        ckpt = run_sft(ctx, recipe_path(self.preset.sft), self.base_model(ctx), dataset, self.opts.sft_steps)
        return {"checkpoint": str(ckpt)}

    def grpo_saves(self) -> bool:
        return recipe_saves(recipe_path(self.preset.grpo))

    def run_grpo(self, ctx: Context, stage: str, model: str, *extra: str) -> dict[str, Any]:
        """``swift rlhf`` of the preset's GRPO recipe from ``model`` on ``WORKDIR/data/grpo.jsonl`` into
        ``WORKDIR/STAGE``; its run directory, and its checkpoint when the recipe saves one."""
        # The plugins' file forms, absolute: they load on every ms-swift whatever the cwd. The files are
        # located, not imported: the tau2 scheduler's entry file imports ms-swift at module level.
        plugins = [plugin_file(module) for module in self.grpo_plugins]
        out = ctx.workdir / stage
        cmd = [SWIFT, "rlhf", str(recipe_path(self.preset.grpo)), "--model", model,
               "--dataset", str(ctx.workdir / "data" / "grpo.jsonl"), "--output_dir", str(out),
               "--external_plugins", *plugins, "--log_completions", "true"]  # fmt: skip
        if self.opts.grpo_steps:  # a shortened run saves (if its recipe saves at all) once, at its end
            cmd += ["--max_steps", str(self.opts.grpo_steps), "--save_steps", str(self.opts.grpo_steps)]
        ctx.run(stage, [*cmd, *extra], {"REWARDKIT_CONFIG": str(recipe_path(self.preset.grpo_config))})
        result = {"run_dir": str(latest_run_dir(out))}
        if self.grpo_saves():
            result["checkpoint"] = str(last_checkpoint(out))
        return result

    def grpo(self, ctx: Context) -> dict[str, Any]:
        return self.run_grpo(ctx, "grpo", ctx.results["sft"]["checkpoint"])

    def grpo_control(self, ctx: Context) -> dict[str, Any]:
        # Later batches may simply hold easier prompts: the control tells that apart from learning.
        return self.run_grpo(ctx, "grpo_control", ctx.results["sft"]["checkpoint"], *NO_LEARNING)

    # -- output checks: run before a stage's marker is written, and before a marker is trusted on a rerun --
    def check_model(self, ctx: Context, result: Mapping[str, Any]) -> None:
        vocab = check_model_dir(marker_path(result, "path"))
        built = marker_value(result, "vocab")
        if vocab != built:
            raise BrokenOutput(f"the tokenizer now has {vocab} tokens, {built} when built")

    def check_sft(self, ctx: Context, result: Mapping[str, Any]) -> None:
        check_checkpoint(marker_path(result, "checkpoint"))

    def check_grpo(self, ctx: Context, result: Mapping[str, Any]) -> None:
        from rewardkit.pipelines.grpo_log import grpo_steps

        log = marker_path(result, "run_dir") / "logging.jsonl"
        if not read_output(log, grpo_steps):
            raise BrokenOutput(f"{log} has no logged GRPO step")
        if self.grpo_saves():  # the recipe saves at the last step: that checkpoint must be whole
            check_checkpoint(marker_path(result, "checkpoint"))

    def check_summary(self, ctx: Context, result: Mapping[str, Any]) -> None:
        path = marker_path(result, "summary")
        summary = read_output(path, _read_json)
        lacks = self.summary_lacks(summary) if isinstance(summary, dict) else "is not a JSON object"
        if lacks:
            raise BrokenOutput(f"{path} {lacks}")

    def summary_lacks(self, summary: Mapping[str, Any]) -> str | None:
        """What the chain's summary.json is missing (``"has no 'eval' section"``), or None."""
        return None
