"""`rewardkit recipe run agent --domain REF`: synthesis -> cold-start SFT -> multi-turn GRPO -> evaluation, resumable.

The chain runs on any domain (``--domain``: a built-in name, an entry point or a path; default retail). The rows,
the runs and the GRPO runs' ``$REWARDKIT_CONFIG`` (``WORKDIR/grpo_config.yaml``: the preset's, plus ``domain:``)
name it as :func:`~rewardkit.envs.portable_ref` writes it, so that every process of ``swift rlhf`` finds it.

Stages: ``data`` (``synth agent``, in this process, on the train tasks, plus the multi-turn GRPO rows), ``model``
(tiny preset: the offline tiny Qwen3), ``sft`` (the cold start), ``grpo`` (``simulated_user``
scheduler, the user simulator in the loop), ``grpo_control`` (with ``--baseline``: the same GRPO
with a learning rate of 1e-12, which sees the same rollouts and learns nothing), ``grpo_inverted``
(with ``--sign-test``: the same GRPO trained on 1 - TaskCompletion), each again per extra seed
(``--seeds N``: ``grpo_s2``, ...), one ``eval_<model>`` stage per model (``eval agent`` on the
training tasks and on the held-out split, greedy and sampled as the GRPO rollouts sample), and ``summary``. With a
band (the tiny preset's, or ``--band``), a ``select`` stage after ``sft`` samples the cold start on the training
tasks, on a random stream of its own, and GRPO trains on those it completes in a share of trials within the band.

The tiny preset runs on CPU: the gold agent and the scripted user make the data, the model is a
tiny random Qwen3 with a one-line system prompt naming the domain and no tools column (short sequences), and the
training tasks are the train split's tasks with at most one gold action (or the fewest any of its tasks has), none
that an episode doing nothing completes (left out, and named). It shows the plumbing learning something
measurable, not a useful agent. The full preset follows MUA-RL: a teacher agent and an LLM user synthesise the data,
the cold start is ``recipes/agent/cold_start_sft.yaml``, GRPO is ``recipes/agent/grpo_multiturn.yaml``, and
evaluation uses another simulator.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.envs import get_domain, portable_ref
from rewardkit.envs.tasks import scripted_actions
from rewardkit.loop.sampling import GREEDY, Sampling
from rewardkit.pipelines.chain import Chain, ChainOptions, ChainPreset, marker_path, marker_value, read_recipe
from rewardkit.pipelines.evidence import model_kinds
from rewardkit.pipelines.stages import BrokenOutput, Context, PipelineError, Stage, check_jsonl, read_output
from rewardkit.recipes import recipe_path
from rewardkit.runs.episodes.spec import RunSpec, check_user

MAX_POSITIONS = 4096  # the tiny model's: multi-turn conversations are longer than planning's prompts
DOMAIN_FIELD = "{domain}"  # in a preset's system prompt file: replaced by the domain's name

# The cold start's sampled trials per training task when the select stage picks GRPO's tasks: a band is read in
# eighths (0.1-0.7: completed 1 to 5 times), whatever --eval-samples the evaluation takes.
SELECT_TRIALS = 8

# Conversations per generation when a model is evaluated: a local checkpoint generates for a batch at once, each
# conversation seeded by its (task, trial), so the figures do not depend on the batch (rewardkit.loop.lockstep).
EVAL_BATCH = 32


@dataclass(frozen=True)
class Preset(ChainPreset):
    system_prompt: str | None  # a recipe file, DOMAIN_FIELD replaced by the domain's name; None: the domain's policy
    tools: bool
    max_actions: int | None  # train tasks with at most this many scripted actions, or the fewest any has (None: all)
    eval_trials: int  # sampled trials per task (pass^k for k up to it); greedy runs one
    # GRPO trains on the training tasks whose cold start, sampled as the rollouts sample, completes a share of its
    # trials in this band (both ends included): the tasks with something to learn. None: every training task.
    band: tuple[float, float] | None


PRESETS = {
    "tiny": Preset(
        "agent/tiny_sft.yaml",
        "agent/tiny_grpo.yaml",
        "agent/tiny_config.yaml",
        True,
        "agent/tiny_system_prompt.txt",
        False,
        1,
        32,
        (0.1, 0.7),
    ),
    "full": Preset(
        "agent/cold_start_sft.yaml",
        "agent/grpo_multiturn.yaml",
        "agent/mua_rl_config.yaml",
        False,
        None,
        True,
        None,
        8,
        None,
    ),
}


@dataclass(frozen=True)
class Options(ChainOptions):
    domain: str = "retail"  # a built-in name, an entry point or a domain's path
    agent: str = "gold"  # who synthesises: gold, or a teacher's URL
    user: str = "scripted"  # the simulator during synthesis
    eval_user: str | None = None  # the simulator during evaluation (MUA-RL: another one); default --user
    eval_tasks: int | None = None  # the first N tasks of the held-out split only
    eval_train_tasks: int | None = None  # the first N training tasks only (default: all of them)
    eval_samples: int | None = None  # sampled trials per task (default: the preset's)
    band: tuple[float, float] | None = None  # GRPO's tasks by the cold start's sampled pass^1 (default: the preset's)


def rows_of(rows: list[dict[str, Any]], tasks: list[str]) -> list[dict[str, Any]]:
    """The multi-turn GRPO rows (``task`` column: the task as JSON) of ``tasks``."""
    wanted = set(tasks)
    return [r for r in rows if str(json.loads(r["task"])["id"]) in wanted]


def _echo(ctx: Context, stage: str, line: str) -> None:
    print(f"[{stage}] {line}", file=ctx.echo, flush=True)


class AgentPipeline(Chain):
    # The rewards, the multi-turn scheduler and the live diagnostics.
    grpo_plugins = ("rewardkit.rewards", "rewardkit.plugins.simulated_user", "rewardkit.plugins.diagnostics")

    def __init__(self, opts: Options) -> None:
        super().__init__(opts, PRESETS)
        self.opts: Options = opts
        self.preset: Preset = PRESETS[opts.preset]
        self.domain = get_domain(opts.domain)  # a domain that does not load: one line and exit 2, before any stage
        self.ref = portable_ref(opts.domain)  # how the rows, the runs and the GRPO config name it
        if not self.preset.tiny and (opts.agent == "gold" or opts.user == "scripted"):
            raise PipelineError("the full preset synthesises with a teacher: pass --agent URL and --user URL")
        check_user(opts.user)  # before any stage runs: not at the evaluation, after the training
        if opts.eval_user is not None:
            check_user(opts.eval_user, "--eval-user")
        self.kinds = model_kinds(self.grpo_runs)
        self.samples = opts.eval_samples or self.preset.eval_trials
        self.band = opts.band or self.preset.band
        if self.samples < 1:
            raise PipelineError(f"--eval-samples: need at least 1, got {self.samples}")

    def stages(self) -> list[Stage]:
        stages = [Stage("data", self.data, self.check_data)]
        stages += [Stage("model", self.model, self.check_model)] if self.preset.tiny else []
        stages += [Stage("sft", self.sft, self.check_sft)]
        stages += [Stage("select", self.select, self.check_select)] if self.band else []
        stages += self.grpo_stages()
        stages += [Stage(f"eval_{m}", self._eval_stage(m), self.check_eval) for m in self.kinds]
        return [*stages, Stage("summary", self.summary, self.check_summary)]

    # -- what `synth agent` and `eval agent` share ---------------------------------------------
    def run_spec(
        self, ctx: Context, sampling: Sampling = GREEDY, recipe: Mapping[str, Any] | None = None, **run: Any
    ) -> RunSpec:
        """A run on the chain's domain with the loop of the GRPO rollouts: the turns and tokens per turn of
        ``recipe`` (default: the preset's GRPO recipe), the system prompt (the data stage writes it) and tools; the
        agent samples as ``sampling`` says (default: greedy)."""
        system_prompt = self.prompt_path(ctx) if self.preset.system_prompt else None
        return RunSpec(
            domain=self.ref,
            system_prompt=system_prompt,
            tools=self.preset.tools,
            temperature=sampling.temperature,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            **self.rollout_loop(recipe),
            **run,
        )

    def rollout_loop(self, recipe: Mapping[str, Any] | None = None) -> dict[str, int]:
        """``max_turns`` and ``max_completion_length`` (tokens per assistant turn) of ``recipe`` (default: the
        preset's GRPO recipe), as the synthesis and the evaluation take them: the episodes they run end where the
        rollouts' end. A recipe that leaves either to ms-swift's default is refused."""
        recipe = read_recipe(recipe_path(self.preset.grpo)) if recipe is None else recipe
        loop = {"max_turns": "max_turns", "max_tokens": "max_completion_length"}
        for key in loop.values():
            if not isinstance(recipe.get(key), int) or isinstance(recipe[key], bool) or recipe[key] < 1:
                raise PipelineError(
                    f"recipes/{self.preset.grpo}: {key}: {recipe.get(key)!r}; the chain's synthesis "
                    f"and evaluation run as many turns and tokens per turn as the GRPO rollouts, so "
                    f"the recipe must set {key} to a positive integer"
                )
        return {mine: int(recipe[theirs]) for mine, theirs in loop.items()}

    def prompt_path(self, ctx: Context) -> Path:
        return ctx.workdir / "data" / "system_prompt.txt"

    def system_prompt(self) -> str | None:
        """The preset's system prompt for the chain's domain (None: the domain's policy)."""
        if self.preset.system_prompt is None:
            return None
        template = recipe_path(self.preset.system_prompt).read_text(encoding="utf-8")
        return template.replace(DOMAIN_FIELD, self.domain.name)

    def train_tasks(self, ctx: Context | None = None) -> list[str]:
        """The train split's usable tasks (as ``synth`` selects them) with at most ``max_actions`` scripted actions
        (:func:`~rewardkit.envs.tasks.scripted_actions`), or with the fewest any of them has when that is more. A task
        that an episode doing nothing completes is left out (:meth:`paid_for_nothing`), named on ``ctx``'s data
        stage."""
        from rewardkit.runs.episodes.selection import select_tasks

        usable, _ = select_tasks(self.domain, "train", None, None)
        paid = self.paid_for_nothing(usable)
        if paid and ctx is not None:
            _echo(ctx, "data", f"left out task(s) {', '.join(paid)}: an episode that does nothing completes them")
        usable = [t for t in usable if str(t["id"]) not in paid]
        if not usable:
            raise PipelineError(f"domain {self.domain.name!r}: its train split has no usable task to train on")
        # Every entry counts, a declined or refused write too: each is a step the agent must take (or refuse).
        actions = {str(t["id"]): len(scripted_actions(t)) for t in usable}
        cap = self.preset.max_actions
        cap = None if cap is None else max(cap, min(actions.values()))
        return [task for task, n in actions.items() if cap is None or n <= cap]

    def paid_for_nothing(self, tasks: list[dict[str, Any]]) -> list[str]:
        """The ids of ``tasks`` that ``task_completion`` pays an episode with no tool call for (``env check``'s
        ``do_nothing``): the reward cannot tell them done, and GRPO would teach the policy to do nothing."""
        from rewardkit.rewards import TaskCompletion
        from rewardkit.runs.domains.domain_check import episode_checks

        reward = TaskCompletion()
        return [str(t["id"]) for t in tasks if not episode_checks(reward, self.ref, t["id"], t, False)[0].passed]

    def grpo_config(self, ctx: Context) -> Path:
        """The preset's ``$REWARDKIT_CONFIG`` with the chain's domain (``domain:``), written into the workdir: each
        trainer rank and the rollout server load the domain from it, whatever their working directory."""
        import yaml

        from rewardkit.config import read_config_file
        from rewardkit.envs.registry import CONFIG_KEY
        from rewardkit.files.outputs import atomic_write_text
        from rewardkit.loop.config import load_run_config

        raw, _ = read_config_file(recipe_path(self.preset.grpo_config))
        path = ctx.workdir / "grpo_config.yaml"
        header = f"# recipes/{self.preset.grpo_config} on the chain's domain (`rewardkit recipe run agent` wrote it)\n"
        atomic_write_text(
            path, header + yaml.safe_dump({**raw, CONFIG_KEY: self.ref}, sort_keys=False, allow_unicode=True)
        )
        load_run_config(path=path)  # what every GRPO process reads, checked here once
        return path

    # -- stages ------------------------------------------------------------------------------
    def data(self, ctx: Context) -> dict[str, Any]:
        # In-process (`rewardkit synth agent`'s own code), then the GRPO rows from the tau2-grpo builder.
        from rewardkit.data_builders import write_jsonl
        from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
        from rewardkit.files.outputs import atomic_write_text, atomic_writer
        from rewardkit.runs.episodes.synthesis import headline, synthesize_run

        out = ctx.workdir / "data"
        tasks = self.train_tasks(ctx)
        system = self.system_prompt()
        if system is not None:
            atomic_write_text(self.prompt_path(ctx), system)
        sft, report_path, episodes = out / "sft.jsonl", out / "synth_report.json", out / "synth_episodes.jsonl"
        spec = self.run_spec(ctx, agent=self.opts.agent, user=self.opts.user, split="train", tasks=tasks)
        outputs = ["--out", str(sft), "--report", str(report_path), "--episodes", str(episodes), "--no-progress"]
        _echo(ctx, "data", f"rewardkit synth agent {shlex.join([*spec.options(), *outputs])}")
        episodes.unlink(missing_ok=True)  # the stage reruns whole; `synth --resume` is for manual runs
        report = synthesize_run(spec, sft, report_path, episodes, progress=False)
        _echo(ctx, "data", headline(report))
        rows, _ = build_tau2_grpo(Tau2Options(domain=self.ref, split="train", multi_turn=True))
        rows = rows_of(rows, tasks)
        if system is not None:
            rows = [{**r, "messages": [{"role": "system", "content": system}, *r["messages"][1:]]} for r in rows]
        if not self.preset.tools:
            rows = [{k: v for k, v in r.items() if k != "tools"} for r in rows]
        with atomic_writer(out / "grpo.jsonl") as f:
            write_jsonl(rows, f)
        return {"dir": str(out), "domain": self.ref, "tasks": tasks, "kept": report["kept"], "grpo_rows": len(rows)}

    def select(self, ctx: Context) -> dict[str, Any]:
        """The training tasks GRPO trains on: those the cold start completes in a share of its sampled trials
        within the preset's band (a task always or never completed gives every group one reward: no gradient).
        Their GRPO rows go to ``WORKDIR/select/grpo.jsonl``."""
        from rewardkit.data_builders import write_jsonl
        from rewardkit.files.jsonl import read_jsonl
        from rewardkit.files.outputs import atomic_writer
        from rewardkit.runs.episodes.evaluation import evaluate_run

        low, high = self.band or (0.0, 1.0)
        out = ctx.workdir / "select"
        # Its own random stream (seed base 1): were it the evaluation's, the cold start's and the control's sampled
        # figures on the chosen tasks would be the very draws that chose them, in the band by construction.
        spec = self.run_spec(
            ctx,
            sampling=self.grpo_sampling(ctx),
            agent=ctx.results["sft"]["checkpoint"],
            user=self.opts.user,
            split="train",
            tasks=ctx.results["data"]["tasks"],
            trials=SELECT_TRIALS,
            workers=EVAL_BATCH,
            seed_base=1,
        )
        _echo(ctx, "select", f"rewardkit eval agent {shlex.join([*spec.options(), '--out-dir', str(out)])}")
        (out / "episodes.jsonl").unlink(missing_ok=True)  # the stage reruns whole
        evaluate_run(spec, out, progress=False, title="the cold start on the training tasks, sampled")
        rates = {r["task_id"]: r["pass1"] for r in read_jsonl(out / "tasks.jsonl")}
        chosen = [t for t in ctx.results["data"]["tasks"] if rates.get(t) is not None and low <= rates[t] <= high]
        if not chosen:
            raise PipelineError(
                f"no training task has a sampled pass^1 in [{low}, {high}] under the cold start "
                f"(per task: {rates}); GRPO would see no reward variance. Widen --band (0,1: every "
                "task), train the cold start longer (--sft-steps) or change the GRPO recipe's "
                "temperature"
            )
        _echo(
            ctx,
            "select",
            f"GRPO trains on {len(chosen)} of {len(rates)} training tasks, sampled pass^1 in "
            f"[{low}, {high}]: {', '.join(f'{t} ({rates[t]:.2f})' for t in chosen)}",
        )
        rows = rows_of(read_jsonl(ctx.workdir / "data" / "grpo.jsonl"), chosen)
        with atomic_writer(out / "grpo.jsonl") as f:
            write_jsonl(rows, f)
        return {"dir": str(out), "tasks": chosen, "rates": rates, "rows": len(rows)}

    def grpo_dataset(self, ctx: Context) -> Path:
        return (
            Path(ctx.results["select"]["dir"]) / "grpo.jsonl" if "select" in ctx.results else super().grpo_dataset(ctx)
        )

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
            # In-process (`rewardkit eval agent`'s own code): one interpreter start instead of one per split.
            from rewardkit.pipelines.agent_report import MODES, SPLITS
            from rewardkit.runs.episodes.evaluation import evaluate_run, headline

            user = self.opts.eval_user or self.opts.user
            limits = {"train": self.opts.eval_train_tasks, "test": self.opts.eval_tasks}
            sets = {"train": {"split": "train", "tasks": ctx.results["data"]["tasks"]}, "test": {"split": "test"}}
            modes = {"greedy": (Sampling(), 1), "sampled": (self.grpo_sampling(ctx), self.samples)}
            out = {}
            for mode in MODES:
                sampling, trials = modes[mode]
                for name in SPLITS:
                    target = ctx.workdir / "eval" / model / f"{mode}_{name}"
                    spec = self.run_spec(
                        ctx,
                        agent=self.checkpoint(ctx, model),
                        user=user,
                        limit=limits[name],
                        trials=trials,
                        sampling=sampling,
                        workers=EVAL_BATCH,
                        **sets[name],
                    )
                    command = shlex.join([*spec.options(), "--out-dir", str(target)])
                    _echo(ctx, f"eval_{model}", f"rewardkit eval agent {command}")
                    (target / "episodes.jsonl").unlink(missing_ok=True)  # the stage reruns whole
                    title = f"{model} on {self.domain.name} {name} tasks, {mode}"
                    summary = evaluate_run(spec, target, progress=False, title=title)
                    _echo(ctx, f"eval_{model}", f"{mode} {name}: {headline(summary)}")
                    out[f"{mode}_{name}"] = str(target)
            return out

        return run

    def summary(self, ctx: Context) -> dict[str, Any]:
        from rewardkit.pipelines.agent_report import write_summary

        path = write_summary(ctx, self.opts.preset, self.domain.name, self.kinds)
        return {"summary": str(path)}

    # -- output checks (the model, SFT, GRPO and summary ones are the chain's) ---------------------------
    def check_data(self, ctx: Context, result: Mapping[str, Any]) -> None:
        data = marker_path(result, "dir")
        made_on = marker_value(result, "domain")
        if made_on != self.ref:  # the workdir of a run on another domain: make the data again, and all after it
            raise BrokenOutput(f"it was made on domain {made_on}; this run's is {self.ref}")
        marker_value(result, "tasks")  # what the evaluation of the training tasks reads
        if self.preset.system_prompt:  # what the evaluation prompts with
            read_output(self.prompt_path(ctx), lambda p: p.read_text(encoding="utf-8"))
        kept, grpo_rows = marker_value(result, "kept"), marker_value(result, "grpo_rows")
        if check_jsonl(data / "sft.jsonl") != kept:
            raise BrokenOutput(f"{data / 'sft.jsonl'} does not hold the {kept} rows synthesis kept")
        if check_jsonl(data / "grpo.jsonl") != grpo_rows:
            raise BrokenOutput(f"{data / 'grpo.jsonl'} does not hold {grpo_rows} rows")

    def check_select(self, ctx: Context, result: Mapping[str, Any]) -> None:
        rows = marker_value(result, "rows")
        if check_jsonl(marker_path(result, "dir") / "grpo.jsonl") != rows or not marker_value(result, "tasks"):
            raise BrokenOutput(f"{marker_path(result, 'dir') / 'grpo.jsonl'} does not hold the {rows} rows chosen")

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
