"""The planning chain's evaluation and summary.

Each model (base, SFT, every GRPO run) answers the held-out test rows and a slice of the GRPO training rows twice:
greedy, and ``samples`` times sampled as the GRPO recipe's rollouts sample (what GRPO optimises), in
the chain's own process on ms-swift's transformers engine, each sample seeded by its row so that every model meets
the same random stream (paired evaluation). Every completion is scored with the seven rewards under the GRPO run's
reward config, into ``eval/<model>/scores.jsonl``. The summary gives each kind's mean and seed spread, GRPO against
its control paired by prompt with a bootstrap interval, the sign test, the think length's mean and standard
deviation, the zero-variance group share of every GRPO step, and two figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardkit.data_builders import write_jsonl
from rewardkit.files.figures import png, pyplot, write_png
from rewardkit.files.jsonl import dumps, read_jsonl
from rewardkit.files.outputs import atomic_write_text, atomic_writer
from rewardkit.pipelines import evidence
from rewardkit.pipelines.stages import Context
from rewardkit.rewards.answers import parse
from rewardkit.runs.stats.scoring import score_rows

if TYPE_CHECKING:
    from rewardkit.loop.sampling import Sampling
    from rewardkit.rewards.config import RewardConfig

SPLITS = ("train", "test")  # a slice of the GRPO training rows, and the held-out test split
MODES = ("greedy", "sampled")
EVAL_BATCH = 64  # completions generated in one batch
LABELS = ("mode", "split", "row", "sample", "seed", "think_chars", "completion")  # a score record's non-scores


def evaluate_model(
    ctx: Context,
    name: str,
    model: str,
    sets: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    samples: int,
    sampling: Sampling,
    max_new_tokens: int,
    config: RewardConfig,
) -> dict[str, Any]:
    """``model`` answers every row of ``sets`` in this process (ms-swift's transformers engine, the template it
    trained with, thinking on), greedy and ``samples`` times sampled; the scores file and the means per mode and
    split. Sample ``k`` of a row is seeded by (split, row, k): every model meets the same random stream."""
    from rewardkit.loop.agents import CheckpointAgent
    from rewardkit.loop.lockstep import episode_seed

    out = ctx.workdir / "eval" / name
    out.mkdir(parents=True, exist_ok=True)
    greedy = CheckpointAgent(model, [], max_tokens=max_new_tokens, thinking=True)
    scored: list[dict[str, Any]] = []
    for mode, agent, n in (("greedy", greedy, 1), ("sampled", greedy.sampled(sampling), samples)):
        cells = [
            {"mode": mode, "split": split, "row": i, "sample": k, "seed": episode_seed(f"{split}/{i}", k)}
            for split in SPLITS
            for i in range(len(sets[split]))
            for k in range(n)
        ]
        rows = [sets[c["split"]][c["row"]] for c in cells]
        texts: list[str] = []
        for at in range(0, len(rows), EVAL_BATCH):
            batch = slice(at, at + EVAL_BATCH)
            seeds = [c["seed"] for c in cells[batch]] if not agent.sampling.greedy else [None] * len(rows[batch])
            texts += [reply.text for reply in agent.replies([r["messages"] for r in rows[batch]], seeds)]
        table = score_rows(
            [
                {"completion": t, "solution": r["solution"], "experts": r["experts"]}
                for t, r in zip(texts, rows, strict=True)
            ],
            config=config,
        )
        for i, (cell, text) in enumerate(zip(cells, texts, strict=True)):
            scores = dict(zip(table.keys, table.scores[i], strict=True))
            scored.append(
                {
                    **cell,
                    **scores,
                    "weighted": table.total(i),
                    "think_chars": len(parse(text).think or ""),
                    "completion": text,
                }
            )
        print(
            f"[eval_{name}] {mode}: {len(cells)} completions of {model}, weighted reward {table.mean_total():.3f}",
            file=ctx.echo,
            flush=True,
        )
    path = out / "scores.jsonl"
    with atomic_writer(path) as f:
        write_jsonl(scored, f)
    return {"scores": str(path), "means": means(scored)}


def means(scored: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """{mode: {split: {reward key | weighted | think_mean | think_sd: value}}}, None scores left out."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        for split in SPLITS:
            cells = [r for r in scored if r["mode"] == mode and r["split"] == split]
            if not cells:
                continue
            keys = [k for k in cells[0] if k not in LABELS]
            figures = {k: statistics.fmean(v) for k in keys if (v := [r[k] for r in cells if r[k] is not None])}
            thinks = [r["think_chars"] for r in cells]
            figures["think_mean"] = statistics.fmean(thinks)
            figures["think_sd"] = statistics.pstdev(thinks)
            out.setdefault(mode, {})[split] = figures
    return out


def per_row(scores: Path, mode: str, split: str, key: str = "weighted") -> dict[str, float]:
    """{row index: the mean of ``key`` over the row's completions} of one model, mode and split."""
    rows: dict[str, list[float]] = {}
    for r in read_jsonl(scores):
        if r["mode"] == mode and r["split"] == split and r[key] is not None:
            rows.setdefault(str(r["row"]), []).append(float(r[key]))
    return {row: statistics.fmean(values) for row, values in rows.items()}


def write_summary(ctx: Context, preset: str, kinds: Mapping[str, str], think_band: tuple[float, float]) -> Path:
    from rewardkit.pipelines.grpo_log import grpo_steps, plot, summarize_steps, think_lengths

    evals = {m: ctx.results[f"eval_{m}"] for m in kinds}
    grpo_models = [m for m, k in kinds.items() if k not in ("base", "sft")]
    models = {
        m: {"kind": k, **({"seed": ctx.results[m]["seed"]} if m in grpo_models else {}), **evals[m]["means"]}
        for m, k in kinds.items()
    }
    figures = {
        mode: {
            split: evidence.per_kind({m: evals[m]["means"][mode][split]["weighted"] for m in kinds}, kinds)
            for split in SPLITS
        }
        for mode in MODES
    }
    rows = {
        (m, f"{mode}_{split}"): per_row(Path(evals[m]["scores"]), mode, split)
        for m in kinds
        for mode in MODES
        for split in SPLITS
    }

    report: dict[str, Any] = {
        "preset": preset,
        "seeds": len([k for k in kinds.values() if k == "grpo"]),
        "models": models,
        "weighted": figures,
        "paired": evidence.paired_by_kind(kinds, rows, [f"{mode}_{split}" for mode in MODES for split in SPLITS]),
        "think_band_chars": list(think_band),
        "grpo": {},
    }
    report["sign_test"] = evidence.sign_test_of(
        report["paired"], "sampled_train", "weighted reward, sampled, training rows"
    )
    for stage in grpo_models + (["grpo_base"] if "grpo_base" in ctx.results else []):
        run = Path(ctx.results[stage]["run_dir"])
        steps = grpo_steps(run / "logging.jsonl")
        png = plot(
            steps,
            think_lengths(run / "completions.jsonl"),
            ctx.workdir / f"{stage}_curves.png",
            f"planning {preset}: {stage}",
            think_band,
        )
        report["grpo"][stage] = {**summarize_steps(steps), "plot": str(png)}
    report["think_plot"] = str(think_plot(evals, kinds, think_band, ctx.workdir / "think_length.png", preset))
    report["plot"] = str(
        evidence.bar_chart(
            figures["sampled"],
            "weighted reward (sampled, mean over seeds)",
            f"planning {preset}: each model, sampled",
            ctx.workdir / "planning.png",
        )
    )
    path = ctx.workdir / "summary.json"
    atomic_write_text(path, dumps(report, indent=2) + "\n")
    return path


def think_plot(
    evals: Mapping[str, Mapping[str, Any]],
    kinds: Mapping[str, str],
    band: tuple[float, float],
    out: Path,
    preset: str,
) -> Path:
    """The think lengths of the sampled test completions before GRPO (SFT) and after it (every GRPO seed), with
    each one's mean and standard deviation, and the band ThinkLength scores 1.0."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, colour in (("sft", "tab:blue"), ("grpo", "tab:orange")):
        lengths = [
            r["think_chars"]
            for m, k in kinds.items()
            if k == kind
            for r in read_jsonl(Path(evals[m]["scores"]))
            if r["mode"] == "sampled" and r["split"] == "test"
        ]
        if lengths:
            label = f"{evidence.LABELS[kind]}: {statistics.fmean(lengths):.0f} ± {statistics.pstdev(lengths):.0f}"
            ax.hist(lengths, bins=range(0, 400, 10), density=True, alpha=0.5, color=colour, label=label)
    ax.axvspan(*band, color="tab:green", alpha=0.12, label=f"ThinkLength band {band[0]:g}-{band[1]:g}")
    ax.set(
        xlabel="think length (characters)",
        ylabel="density of sampled test completions",
        title=f"planning {preset}: think length before and after GRPO (mean ± sd)",
    )
    ax.legend(fontsize=8)
    return write_png(png(fig, "the think-length figure"), out)
