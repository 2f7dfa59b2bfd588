"""`rewardkit recipe run tau2`: synthesis -> cold-start SFT -> multi-turn GRPO -> evaluation, resumable.

Stages: ``data`` (``synth tau2``, in this process, on the train tasks, plus the multi-turn GRPO rows), ``model``
(tiny preset: the offline tiny Qwen3), ``sft`` (the cold start), ``grpo`` (``tau2_user``
scheduler, the user simulator in the loop), ``grpo_control`` (with ``--baseline``: the same GRPO
with a learning rate of 1e-12, which sees the same rollouts and learns nothing), ``grpo_inverted``
(with ``--sign-test``: the same GRPO trained on 1 - TaskCompletion), each again per extra seed
(``--seeds N``: ``grpo_s2``, ...), one ``eval_<model>`` stage per model (``eval tau2`` on the
training tasks and on the held-out split, greedy and sampled at the GRPO temperature), and ``summary``.

The tiny preset runs on CPU: the gold agent and the scripted user make the data, the model is a
tiny random Qwen3 with a one-line system prompt and no tools column (short sequences), and the
training tasks are the train split's tasks with at most one gold action. It shows the plumbing
learning something measurable, not a useful agent. The full preset follows MUA-RL: a teacher
agent and an LLM user synthesise the data, the cold start is ``recipes/tau2/cold_start_sft.yaml``,
GRPO is ``recipes/tau2/grpo_multiturn.yaml``, and evaluation uses another simulator.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewardkit.pipelines.chain import Chain, ChainOptions, ChainPreset, marker_path, marker_value
from rewardkit.pipelines.evidence import model_kinds
from rewardkit.pipelines.stages import BrokenOutput, Context, PipelineError, Stage, check_jsonl, read_output
from rewardkit.recipes import recipe_path
from rewardkit.runs.spec import RunSpec

MAX_POSITIONS = 4096  # the tiny model's: multi-turn conversations are longer than planning's prompts


@dataclass(frozen=True)
class Preset(ChainPreset):
    system_prompt: str | None  # None: the domain's policy
    tools: bool
    max_actions: int | None  # train tasks with at most this many gold actions (None: all)
    eval_trials: int  # sampled trials per task (pass^k for k up to it); greedy runs one
    max_tokens: int
    max_turns: int


PRESETS = {
    "tiny": Preset("tau2/tiny_sft.yaml", "tau2/tiny_grpo.yaml", "tau2/tiny_config.yaml", True,
                   "tau2/tiny_system_prompt.txt", False, 1, 8, 128, 4),
    "full": Preset("tau2/cold_start_sft.yaml", "tau2/grpo_multiturn.yaml", "tau2/mua_rl_config.yaml", False,
                   None, True, None, 8, 2048, 30),
}  # fmt: skip


@dataclass(frozen=True)
class Options(ChainOptions):
    agent: str = "gold"  # who synthesises: gold, or a teacher's URL
    user: str = "scripted"  # the simulator during synthesis
    eval_user: str | None = None  # the simulator during evaluation (MUA-RL: another one); default --user
    eval_tasks: int | None = None  # the first N tasks of the held-out split only
    eval_train_tasks: int | None = None  # the first N training tasks only (default: all of them)
    eval_samples: int | None = None  # sampled trials per task (default: the preset's)


def _echo(ctx: Context, stage: str, line: str) -> None:
    print(f"[{stage}] {line}", file=ctx.echo, flush=True)


class Tau2Pipeline(Chain):
    grpo_plugins = ("rewardkit.rewards", "rewardkit.plugins.tau2_user")  # the rewards and the multi-turn scheduler

    def __init__(self, opts: Options) -> None:
        super().__init__(opts, PRESETS)
        self.opts: Options = opts
        self.preset: Preset = PRESETS[opts.preset]
        if not self.preset.tiny and (opts.agent == "gold" or opts.user == "scripted"):
            raise PipelineError("the full preset synthesises with a teacher: pass --agent URL and --user URL")
        self.kinds = model_kinds(self.grpo_runs)
        self.samples = opts.eval_samples or self.preset.eval_trials
        if self.samples < 1:
            raise PipelineError(f"--eval-samples: need at least 1, got {self.samples}")

    def stages(self) -> list[Stage]:
        stages = [Stage("data", self.data, self.check_data)]
        stages += [Stage("model", self.model, self.check_model)] if self.preset.tiny else []
        stages += [Stage("sft", self.sft, self.check_sft), *self.grpo_stages()]
        stages += [Stage(f"eval_{m}", self._eval_stage(m), self.check_eval) for m in self.kinds]
        return [*stages, Stage("summary", self.summary, self.check_summary)]

    # -- what `synth tau2` and `eval tau2` share ---------------------------------------------
    def run_spec(self, **run: Any) -> RunSpec:
        """A run with the preset's loop: its tokens per message, turns, system prompt and tools."""
        prompt = self.preset.system_prompt
        system_prompt = recipe_path(prompt) if prompt else None
        return RunSpec(max_tokens=self.preset.max_tokens, max_turns=self.preset.max_turns, system_prompt=system_prompt,
                       tools=self.preset.tools, **run)  # fmt: skip

    def train_tasks(self) -> list[str]:
        """The train split's usable tasks (as ``synth`` selects them) with at most ``max_actions`` gold actions."""
        from rewardkit.envs import get_domain
        from rewardkit.runs.episode_log import select_tasks

        usable, _ = select_tasks(get_domain("retail"), "train", None, None)
        cap = self.preset.max_actions
        return [str(t["id"]) for t in usable if cap is None or len(t["evaluation_criteria"]["actions"]) <= cap]

    # -- stages ------------------------------------------------------------------------------
    def data(self, ctx: Context) -> dict[str, Any]:
        # In-process (`rewardkit synth tau2`'s own code), then the GRPO rows from the tau2-grpo builder.
        from rewardkit.data_builders import write_jsonl
        from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
        from rewardkit.files.outputs import atomic_writer
        from rewardkit.runs.synthesis import headline, synthesize_run

        out = ctx.workdir / "data"
        tasks = self.train_tasks()
        sft, report_path, episodes = out / "sft.jsonl", out / "synth_report.json", out / "synth_episodes.jsonl"
        spec = self.run_spec(agent=self.opts.agent, user=self.opts.user, split="train", tasks=tasks)
        outputs = ["--out", str(sft), "--report", str(report_path), "--episodes", str(episodes), "--no-progress"]
        _echo(ctx, "data", f"rewardkit synth tau2 {shlex.join([*spec.options(), *outputs])}")
        episodes.unlink(missing_ok=True)  # the stage reruns whole; `synth --resume` is for manual runs
        report = synthesize_run(spec, sft, report_path, episodes, progress=False)
        _echo(ctx, "data", headline(report))
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
        return {"dir": str(out), "tasks": tasks, "kept": report["kept"], "grpo_rows": len(rows)}

    def model(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.files.jsonl import read_jsonl

        data = ctx.workdir / "data"
        rows = read_jsonl(data / "sft.jsonl") + read_jsonl(data / "grpo.jsonl")
        corpus = [str(m["content"]) for r in rows for m in r["messages"]]
        return self.build_model(ctx, corpus, max_positions=MAX_POSITIONS)

    def checkpoint(self, ctx: Context, model: str) -> str:
        return self.base_model(ctx) if model == "base" else ctx.results[model]["checkpoint"]

    def _eval_stage(self, model: str):  # returns a Stage.run callable
        def run(ctx: Context) -> dict[str, Any]:
            # In-process (`rewardkit eval tau2`'s own code): one interpreter start instead of one per split.
            from rewardkit.pipelines.tau2_report import MODES, SPLITS
            from rewardkit.runs.evaluation import evaluate_run, headline

            user = self.opts.eval_user or self.opts.user
            limits = {"train": self.opts.eval_train_tasks, "test": self.opts.eval_tasks}
            sets = {"train": {"split": "train", "tasks": ctx.results["data"]["tasks"]}, "test": {"split": "test"}}
            modes = {"greedy": (0.0, 1), "sampled": (self.grpo_temperature(), self.samples)}
            out = {}
            for mode in MODES:
                temperature, trials = modes[mode]
                for name in SPLITS:
                    target = ctx.workdir / "eval" / model / f"{mode}_{name}"
                    spec = self.run_spec(agent=self.checkpoint(ctx, model), user=user, limit=limits[name],
                                         trials=trials, temperature=temperature, **sets[name])  # fmt: skip
                    command = shlex.join([*spec.options(), "--out-dir", str(target)])
                    _echo(ctx, f"eval_{model}", f"rewardkit eval tau2 {command}")
                    (target / "episodes.jsonl").unlink(missing_ok=True)  # the stage reruns whole
                    summary = evaluate_run(spec, target, progress=False, title=f"{model} on {name} tasks, {mode}")
                    _echo(ctx, f"eval_{model}", f"{mode} {name}: {headline(summary)}")
                    out[f"{mode}_{name}"] = str(target)
            return out

        return run

    def summary(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.tau2_report import write_summary

        path = write_summary(ctx, self.opts.preset, self.kinds)
        return {"summary": str(path)}

    # -- output checks (the model, SFT, GRPO and summary ones are the chain's) ---------------------------
    def check_data(self, ctx: Context, result: Mapping[str, Any]) -> None:
        data = marker_path(result, "dir")
        marker_value(result, "tasks")  # what the evaluation of the training tasks reads
        kept, grpo_rows = marker_value(result, "kept"), marker_value(result, "grpo_rows")
        if check_jsonl(data / "sft.jsonl") != kept:
            raise BrokenOutput(f"{data / 'sft.jsonl'} does not hold the {kept} rows synthesis kept")
        if check_jsonl(data / "grpo.jsonl") != grpo_rows:
            raise BrokenOutput(f"{data / 'grpo.jsonl'} does not hold {grpo_rows} rows")

    def check_eval(self, ctx: Context, result: Mapping[str, Any]) -> None:
        for name in ("greedy_train", "greedy_test", "sampled_train", "sampled_test"):
            path = marker_path(result, name) / "summary.json"
            summary = read_output(path, lambda p: json.loads(p.read_text(encoding="utf-8")))
            if not isinstance(summary, dict) or "pass_hat_k" not in summary:
                raise BrokenOutput(f"{path} has no 'pass_hat_k'")

    def summary_lacks(self, summary: Mapping[str, Any]) -> str | None:
        models = summary.get("models")
        missing = [m for m in self.kinds if not isinstance(models, Mapping) or m not in models]
        return f"lacks the model(s) {', '.join(missing)}" if missing else None
