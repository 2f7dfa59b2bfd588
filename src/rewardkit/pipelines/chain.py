"""The skeleton both `recipe run` chains (planning, agent) are built on.

A chain has options and a preset, checked before any stage runs; on the tiny preset it builds the
offline tiny Qwen3 (one size, :data:`TINY_MODEL`) and trains it on CPU; it runs the SFT, then GRPO
from a model. With ``--baseline`` it also runs the no-learning control: the same GRPO at a learning rate
of 1e-12 (:data:`NO_LEARNING`), which sees the same prompts in the same order and learns nothing. With
``--sign-test`` it adds the inverted run: the same GRPO with every reward weight negated, so each
advantage flips sign; it must move the measured reward down where the normal run moves it up.
``--seeds N`` repeats these runs under N seeds (:func:`grpo_runs`). Every GRPO run saves its weights
(a LoRA adapter merged) so that the chains can evaluate it. The output checks of those stages live
here too; a marker that lacks a key fails its check naming the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.loop.sampling import Sampling, rollout_sampling
from rewardkit.pipelines.stages import (
    SWIFT,
    BrokenOutput,
    Context,
    PipelineError,
    Stage,
    check_checkpoint,
    check_model_dir,
    last_checkpoint,
    latest_run_dir,
    merged,
    plugin_file,
    read_output,
    run_sft,
)
from rewardkit.recipes import recipe_path

# Big enough to learn the format in ~2 minutes of CPU SFT (hidden 128 learned it less reliably).
TINY_MODEL = {"vocab_size": 2048, "hidden_size": 256, "num_layers": 2}
# The control's learning rate: every step runs, nothing moves.
NO_LEARNING = ("--learning_rate", "1e-12")
BASE_SEED = 42  # the recipes' seed: seed i of --seeds N is BASE_SEED + i
# What each kind of GRPO run is called; a later seed's stage adds _s2, _s3, ...
KIND_STAGES = {"grpo": "grpo", "control": "grpo_control", "inverted": "grpo_inverted"}


@dataclass(frozen=True)
class GrpoRun:
    stage: str  # its stage, output directory and model name: grpo, grpo_control_s2, ...
    kind: str  # grpo (learns the reward), control (learns nothing), inverted (learns the negated reward)
    seed: int


@dataclass(frozen=True)
class ChainPreset:
    sft: str  # the SFT recipe, under recipes/
    grpo: str  # the GRPO recipe
    grpo_config: str  # REWARDKIT_CONFIG of the GRPO runs (rewards; agent: the simulator and the loop too)
    tiny: bool  # build the offline tiny Qwen3 as the base model


@dataclass(frozen=True)
class ChainOptions:
    preset: str = "tiny"
    model: str | None = None  # the base model of the full preset: a local path or hub id
    sft_steps: int | None = None
    grpo_steps: int | None = None
    baseline: bool = False  # also the control runs
    seeds: int = 1  # the GRPO runs (and their controls) under this many seeds
    sign_test: bool = False  # also GRPO on the inverted reward (implies the control)


def grpo_runs(opts: ChainOptions) -> list[GrpoRun]:
    """The GRPO runs of a chain, seed by seed: the normal run, the control (``--baseline`` or
    ``--sign-test``), the inverted run (``--sign-test``)."""
    kinds = ["grpo", *(["control"] if opts.baseline or opts.sign_test else []), *(["inverted"] * opts.sign_test)]
    return [
        GrpoRun(KIND_STAGES[kind] + (f"_s{i + 1}" if i else ""), kind, BASE_SEED + i)
        for i in range(opts.seeds)
        for kind in kinds
    ]


def swift_flags(settings: Mapping[str, object]) -> list[str]:
    """``{"max_steps": 2, "seed": 42}`` -> ``["--max_steps", "2", "--seed", "42"]``: ms-swift flags, a later one
    winning over an earlier one of the same name."""
    return [part for key, value in settings.items() for part in (f"--{key}", str(value))]


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
    strategy = str(read_recipe(recipe).get("save_strategy", "steps")).lower()
    return strategy not in ("no", "false")  # YAML reads a bare no as False


def read_recipe(recipe: Path) -> dict[str, Any]:
    """An ms-swift recipe's keys; an empty file is no keys (a $REWARDKIT_CONFIG file is read by rewardkit.config)."""
    import yaml

    return yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}


def inverted_weights(recipe: Path) -> list[str]:
    """The recipe's ``reward_weights`` negated (ms-swift's default: 1 per reward): the weighted sum flips sign,
    and so does every group's normalised advantage, whatever its mean and spread."""
    config = read_recipe(recipe)
    funcs = config.get("reward_funcs") or []
    weights = config.get("reward_weights") or [1.0] * len(funcs)
    if not weights:
        raise PipelineError(f"{recipe}: no reward_funcs to invert for --sign-test")
    return [repr(-float(w)) for w in weights]


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class Chain:
    """What both chains do alike. A chain lists its stages; these are the methods they share."""

    # Modules ms-swift loads for GRPO (their files): the rewards, and the live diagnostics (plugins/diagnostics.py).
    grpo_plugins: tuple[str, ...] = ("rewardkit.rewards", "rewardkit.plugins.diagnostics")

    def __init__(self, opts: ChainOptions, presets: Mapping[str, ChainPreset]) -> None:
        if opts.preset not in presets:
            raise PipelineError(f"--preset: unknown {opts.preset!r}; choose from {sorted(presets)}")
        self.opts, self.preset = opts, presets[opts.preset]
        if not self.preset.tiny and not opts.model:
            raise PipelineError("--model is required for the full preset (a local path or hub id of the base model)")
        if opts.seeds < 1:
            raise PipelineError(f"--seeds: need at least 1 seed, got {opts.seeds}")
        if not recipe_saves(recipe_path(self.preset.grpo)):
            raise PipelineError(f"{self.preset.grpo} saves no checkpoint (save_strategy: no): the chain evaluates it")
        self.grpo_runs = grpo_runs(opts)

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

    def grpo_sampling(self, ctx: Context) -> Sampling:
        """How the preset's GRPO rollouts sample (temperature, top-k, top-p) from the chain's cold start: what the
        sampled evaluation uses, so that it measures the distribution GRPO optimised."""
        try:
            return rollout_sampling(read_recipe(recipe_path(self.preset.grpo)), ctx.results["sft"]["checkpoint"])
        except ValueError as exc:
            raise PipelineError(f"recipes/{self.preset.grpo}: {exc}") from None

    def grpo_dataset(self, ctx: Context) -> Path:
        """The rows GRPO trains on."""
        return ctx.workdir / "data" / "grpo.jsonl"

    def run_grpo(self, ctx: Context, run: GrpoRun, model: str, *overrides: str) -> dict[str, Any]:
        """``swift rlhf`` of the preset's GRPO recipe from ``model`` on :meth:`grpo_dataset` into
        ``WORKDIR/STAGE`` under the run's seed (``overrides``: more ``swift`` flags, last); its run directory
        and its (merged) checkpoint."""
        recipe = recipe_path(self.preset.grpo)
        extra = ["--seed", str(run.seed)]
        if run.kind == "control":
            extra += NO_LEARNING
        elif run.kind == "inverted":
            extra += ["--reward_weights", *inverted_weights(recipe)]
        # The plugins' file forms, absolute: they load on every ms-swift whatever the cwd. The files are
        # located, not imported: the simulated_user scheduler's entry file imports ms-swift at module level.
        plugins = [plugin_file(module) for module in self.grpo_plugins]
        out = ctx.workdir / run.stage
        cmd = [
            *(SWIFT, "rlhf", str(recipe)),
            *swift_flags({"model": model, "dataset": self.grpo_dataset(ctx), "output_dir": out}),
            *("--external_plugins", *plugins),
            *swift_flags({"callbacks": "rewardkit_diagnostics", "log_completions": "true"}),
        ]
        if self.opts.grpo_steps:  # a shortened run saves (if its recipe saves at all) once, at its end
            cmd += swift_flags({"max_steps": self.opts.grpo_steps, "save_steps": self.opts.grpo_steps})
        ctx.run(run.stage, [*cmd, *extra, *overrides], {"REWARDKIT_CONFIG": str(self.grpo_config(ctx))})
        checkpoint = merged(ctx, run.stage, last_checkpoint(out))
        run_dir = latest_run_dir(out)
        audited = self.audit(ctx, run_dir)
        return {
            "run_dir": str(run_dir),
            "checkpoint": str(checkpoint),
            "kind": run.kind,
            "seed": run.seed,
            "audit": str(audited),
        }

    def audit(self, ctx: Context, run_dir: Path) -> Path:
        """``rewardkit audit`` of a finished GRPO run, into ``RUN_DIR/audit`` (summary, dashboard and JSON)."""
        from rewardkit.runs.training.audit import load_run
        from rewardkit.runs.training.audit_report import write_audit

        out = run_dir / "audit"
        write_audit(load_run(run_dir), out, self.grpo_config(ctx), json_path=out / "audit.json")
        return out / "audit.md"

    def grpo_config(self, ctx: Context) -> Path:
        """The ``$REWARDKIT_CONFIG`` of the GRPO runs: the preset's."""
        return recipe_path(self.preset.grpo_config)

    def grpo_stages(self) -> list[Stage]:
        """One stage per GRPO run, each from the SFT checkpoint. The control tells learning apart from later
        batches simply holding easier prompts; the inverted run tells a gradient that points the right way
        from one that does not."""

        def stage(run: GrpoRun) -> Stage:
            return Stage(
                run.stage, lambda ctx: self.run_grpo(ctx, run, ctx.results["sft"]["checkpoint"]), self.check_grpo
            )

        return [stage(run) for run in self.grpo_runs]

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
