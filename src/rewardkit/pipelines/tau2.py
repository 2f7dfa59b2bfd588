"""`rewardkit recipe run tau2`: synthesis -> cold-start SFT -> multi-turn GRPO -> evaluation, resumable.

Stages: ``data`` (``synth tau2`` on the train tasks, plus the multi-turn GRPO rows), ``model``
(tiny preset: the offline tiny Qwen3), ``sft`` (the cold start), ``grpo`` (``tau2_user``
scheduler, the user simulator in the loop), ``grpo_control`` (with ``--baseline``: the same GRPO
with a learning rate of 1e-12, which sees the same rollouts and learns nothing), one ``eval_<model>``
stage per model (``eval tau2`` on the training tasks and on the held-out split), and ``summary``.

The tiny preset runs on CPU: the gold agent and the scripted user make the data, the model is a
tiny random Qwen3 with a one-line system prompt and no tools column (short sequences), and the
training tasks are the train split's tasks with at most one gold action. It shows the plumbing
learning something measurable, not a useful agent. The full preset follows MUA-RL: a teacher
agent and an LLM user synthesise the data, the cold start is ``recipes/tau2/cold_start_sft.yaml``,
GRPO is ``recipes/tau2/grpo_multiturn.yaml``, and evaluation uses another simulator.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.pipelines.stages import (
    SWIFT,
    BrokenOutput,
    Context,
    PipelineError,
    Stage,
    check_checkpoint,
    check_jsonl,
    check_model_dir,
    last_checkpoint,
    latest_run_dir,
    plugin_file,
    read_output,
    run_sft,
)
from rewardkit.recipes import recipe_path

REWARDKIT = [sys.executable, "-m", "rewardkit.cli"]
TINY_MODEL = {"vocab_size": 2048, "hidden_size": 256, "num_layers": 2, "max_positions": 4096}
MODELS = ("base", "sft", "grpo", "grpo_control")


@dataclass(frozen=True)
class Preset:
    sft: str
    grpo: str
    user_config: str  # REWARDKIT_CONFIG of the GRPO run (user_sim and rollout sections)
    tiny: bool
    system_prompt: str | None  # None: the domain's policy
    tools: bool
    max_actions: int | None  # train tasks with at most this many gold actions (None: all)
    eval_trials: int
    max_tokens: int
    max_turns: int


PRESETS = {
    "tiny": Preset("tau2/tiny_sft.yaml", "tau2/tiny_grpo.yaml", "tau2/tiny_config.yaml", True,
                   "tau2/tiny_system_prompt.txt", False, 1, 1, 128, 4),
    "full": Preset("tau2/cold_start_sft.yaml", "tau2/grpo_multiturn.yaml", "tau2/mua_rl_config.yaml", False,
                   None, True, None, 4, 2048, 30),
}  # fmt: skip


@dataclass(frozen=True)
class Options:
    preset: str = "tiny"
    model: str | None = None  # full preset: the base model
    agent: str = "gold"  # who synthesises: gold, or a teacher's URL
    user: str = "scripted"  # the simulator during synthesis
    eval_user: str | None = None  # the simulator during evaluation (MUA-RL: another one); default --user
    sft_steps: int | None = None
    grpo_steps: int | None = None
    eval_tasks: int | None = None  # the first N tasks of the held-out split only
    baseline: bool = False


class Tau2Pipeline:
    def __init__(self, opts: Options) -> None:
        if opts.preset not in PRESETS:
            raise PipelineError(f"--preset: unknown {opts.preset!r}; choose from {sorted(PRESETS)}")
        self.opts, self.preset = opts, PRESETS[opts.preset]
        if not self.preset.tiny and not opts.model:
            raise PipelineError("--model is required for the full preset (a local path or hub id of the base model)")
        if not self.preset.tiny and (opts.agent == "gold" or opts.user == "scripted"):
            raise PipelineError("the full preset synthesises with a teacher: pass --agent URL and --user URL")
        self.models = [m for m in MODELS if opts.baseline or m != "grpo_control"]

    def stages(self) -> list[Stage]:
        stages = [Stage("data", self.data, self.check_data)]
        stages += [Stage("model", self.model, self.check_model)] if self.preset.tiny else []
        stages += [Stage("sft", self.sft, self.check_sft), Stage("grpo", self.grpo, self.check_grpo)]
        stages += [Stage("grpo_control", self.grpo_control, self.check_grpo)] if self.opts.baseline else []
        stages += [Stage(f"eval_{m}", self._eval_stage(m), self.check_eval) for m in self.models]
        return [*stages, Stage("summary", self.summary, self.check_summary)]

    # -- shared options of `synth tau2` and `eval tau2` --------------------------------------
    def _loop_args(self) -> list[str]:
        args = ["--max-tokens", str(self.preset.max_tokens), "--max-turns", str(self.preset.max_turns)]
        if self.preset.system_prompt:
            args += ["--system-prompt", str(recipe_path(self.preset.system_prompt))]
        return [*args, "--no-tools"] if not self.preset.tools else args

    def train_tasks(self) -> list[str]:
        from rewardkit.envs import get_domain

        domain = get_domain("retail")
        tasks = domain.tasks()
        cap = self.preset.max_actions
        return [i for i in domain.splits()["train"]
                if cap is None or len(tasks[i]["evaluation_criteria"]["actions"]) <= cap]  # fmt: skip

    # -- stages ------------------------------------------------------------------------------
    def data(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.data_builders import write_jsonl
        from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
        from rewardkit.files.outputs import atomic_writer

        out = ctx.workdir / "data"
        tasks = self.train_tasks()
        episodes = out / "synth_episodes.jsonl"
        episodes.unlink(missing_ok=True)  # the stage reruns whole; `synth --resume` is for manual runs
        ctx.run("data", [*REWARDKIT, "synth", "tau2", "--agent", self.opts.agent, "--user", self.opts.user,
                         "--split", "train", "--tasks", ",".join(tasks), "--out", str(out / "sft.jsonl"),
                         "--report", str(out / "synth_report.json"), "--episodes", str(episodes),
                         "--no-progress", *self._loop_args()])  # fmt: skip
        rows, _ = build_tau2_grpo(Tau2Options(split="train", multi_turn=True))
        wanted = set(tasks)
        rows = [r for r in rows if json.loads(r["task"])["id"] in wanted]
        if self.preset.system_prompt:
            system = recipe_path(self.preset.system_prompt).read_text(encoding="utf-8")
            rows = [{**r, "messages": [{"role": "system", "content": system}, *r["messages"][1:]]} for r in rows]
        if not self.preset.tools:
            rows = [{k: v for k, v in r.items() if k != "tools"} for r in rows]
        with atomic_writer(out / "grpo.jsonl") as f:
            write_jsonl(rows, f)
        report = json.loads((out / "synth_report.json").read_text(encoding="utf-8"))
        return {"dir": str(out), "tasks": tasks, "kept": report["kept"], "grpo_rows": len(rows)}

    def model(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.tiny_model import build_tiny_model
        from rewardkit.runs.scoring import read_jsonl

        data = ctx.workdir / "data"
        rows = read_jsonl(data / "sft.jsonl") + read_jsonl(data / "grpo.jsonl")
        corpus = [str(m["content"]) for r in rows for m in r["messages"]]
        out = build_tiny_model(ctx.workdir / "tiny-model", corpus, **TINY_MODEL)
        return {"path": str(out), "vocab": check_model_dir(out)}

    def base_model(self, ctx: Context) -> str:
        return ctx.results["model"]["path"] if self.preset.tiny else str(self.opts.model)

    def sft(self, ctx: Context) -> dict[str, Any]:
        dataset = ctx.workdir / "data" / "sft.jsonl"
        ckpt = run_sft(ctx, recipe_path(self.preset.sft), self.base_model(ctx), dataset, self.opts.sft_steps)
        return {"checkpoint": str(ckpt)}

    def _grpo(self, ctx: Context, stage: str, *extra: str) -> dict[str, Any]:
        # The plugins' file forms, absolute: they load on every ms-swift whatever the cwd. The files are
        # located, not imported: the scheduler's entry file imports ms-swift at module level.
        plugins = [plugin_file("rewardkit.rewards"), plugin_file("rewardkit.plugins.tau2_user")]
        out = ctx.workdir / stage
        cmd = [SWIFT, "rlhf", str(recipe_path(self.preset.grpo)), "--model", ctx.results["sft"]["checkpoint"],
               "--dataset", str(ctx.workdir / "data" / "grpo.jsonl"), "--output_dir", str(out),
               "--external_plugins", *plugins]  # fmt: skip
        if self.opts.grpo_steps:
            cmd += ["--max_steps", str(self.opts.grpo_steps), "--save_steps", str(self.opts.grpo_steps)]
        ctx.run(stage, [*cmd, *extra], {"REWARDKIT_CONFIG": str(recipe_path(self.preset.user_config))})
        run = latest_run_dir(out)
        return {"run_dir": str(run), "checkpoint": str(last_checkpoint(out))}

    def grpo(self, ctx: Context) -> dict[str, Any]:
        return self._grpo(ctx, "grpo")

    def grpo_control(self, ctx: Context) -> dict[str, Any]:
        # Later batches may simply hold easier tasks: the control tells that apart from learning.
        return self._grpo(ctx, "grpo_control", "--learning_rate", "1e-12")

    def checkpoint(self, ctx: Context, model: str) -> str:
        return self.base_model(ctx) if model == "base" else ctx.results[model]["checkpoint"]

    def _eval_stage(self, model: str):  # returns a Stage.run callable
        def run(ctx: Context) -> dict[str, Any]:
            # In-process (`rewardkit eval tau2`'s own code): one interpreter start instead of one per split.
            from rewardkit.cli import build_parser
            from rewardkit.runs.episode_log import EpisodeLog
            from rewardkit.runs.evaluation import evaluate, headline
            from rewardkit.runs.spec import build_plan

            user = self.opts.eval_user or self.opts.user
            limit = ["--limit", str(self.opts.eval_tasks)] if self.opts.eval_tasks else []
            sets = {"train": ["--split", "train", "--tasks", ",".join(ctx.results["data"]["tasks"]), *limit],
                    "test": ["--split", "test", *limit]}  # fmt: skip
            out = {}
            for name, which in sets.items():
                target = ctx.workdir / "eval" / model / name
                argv = ["eval", "tau2", "--agent", self.checkpoint(ctx, model), "--user", user, *self._loop_args(),
                        *which, "--trials", str(self.preset.eval_trials), "--out-dir", str(target)]  # fmt: skip
                print(f"[eval_{model}] rewardkit {' '.join(argv)}", file=ctx.echo, flush=True)
                (target / "episodes.jsonl").unlink(missing_ok=True)  # the stage reruns whole
                plan, meta = build_plan(build_parser().parse_args(argv))
                log = EpisodeLog(target / "episodes.jsonl", meta["run"], resume=False)
                summary = evaluate(plan, log, target, meta, progress=False, title=f"{model} on {name} tasks")
                print(f"[eval_{model}] {name}: {headline(summary)}", file=ctx.echo, flush=True)
                out[name] = str(target)
            return out

        return run

    def summary(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.tau2_report import write_summary

        path = write_summary(ctx, self.opts.preset, self.models)
        return {"summary": str(path)}

    # -- output checks ---------------------------------------------------------------------------
    def check_data(self, ctx: Context, result: Mapping[str, Any]) -> None:
        data = Path(str(result.get("dir")))
        if check_jsonl(data / "sft.jsonl") != result.get("kept"):
            raise BrokenOutput(f"{data / 'sft.jsonl'} does not hold the {result.get('kept')} rows synthesis kept")
        if check_jsonl(data / "grpo.jsonl") != result.get("grpo_rows"):
            raise BrokenOutput(f"{data / 'grpo.jsonl'} does not hold {result.get('grpo_rows')} rows")

    def check_model(self, ctx: Context, result: Mapping[str, Any]) -> None:
        if check_model_dir(Path(str(result.get("path")))) != result.get("vocab"):
            raise BrokenOutput("the tiny model's tokenizer changed since it was built")

    def check_sft(self, ctx: Context, result: Mapping[str, Any]) -> None:
        check_checkpoint(Path(str(result.get("checkpoint"))))

    def check_grpo(self, ctx: Context, result: Mapping[str, Any]) -> None:
        from rewardkit.pipelines.grpo_log import grpo_steps

        check_checkpoint(Path(str(result.get("checkpoint"))))
        log = Path(str(result.get("run_dir"))) / "logging.jsonl"
        if not read_output(log, grpo_steps):
            raise BrokenOutput(f"{log} has no logged GRPO step")

    def check_eval(self, ctx: Context, result: Mapping[str, Any]) -> None:
        for name in ("train", "test"):
            summary = Path(str(result.get(name))) / "summary.json"
            read_output(summary, lambda p: json.loads(p.read_text(encoding="utf-8"))["pass_hat_k"])

    def check_summary(self, ctx: Context, result: Mapping[str, Any]) -> None:
        path = Path(str(result.get("summary")))
        summary = read_output(path, lambda p: json.loads(p.read_text(encoding="utf-8")))
        if not isinstance(summary, dict) or set(self.models) - set(summary.get("models", {})):
            raise BrokenOutput(f"{path} lacks a model")
