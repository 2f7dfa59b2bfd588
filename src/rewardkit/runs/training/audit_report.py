"""The audit of a GRPO run as a person reads it: the figures per step, the patterns that stop learning, a summary in
Markdown and a dashboard PNG (``rewardkit audit RUN_DIR``).

Each flag names the step where its pattern starts:

- ``no_gradient``: at least ``ZERO_VARIANCE_FLAG`` of the groups have no variance in the total, so no advantage;
- ``flat_total``: every group's total is flat while some reward still varies inside the groups (the weights cancel
  it or weigh it 0: a total ``reward_std`` of 0 beside per-reward stds that are not);
- ``one_reward_drives``: one reward carries at least ``DRIVER_FLAG`` of the within-group variance;
- ``turns_collapse``: the mean number of turns fell to half the first step's or less (multi-turn runs);
- ``tools_skipped``: tool calls per episode fell to half the first step's or less (from ``rollouts.jsonl``);
- ``max_turns``: at least ``MAX_TURNS_FLAG`` of a step's episodes ran out of turns instead of ending;
- ``simulator_failed``: some episodes ended because the simulated user failed (``UserSimFailure`` above 0).

The JSON report is strict JSON: a figure that is not finite (scores so large that a variance overflows) is
written as null, never as ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.files.figures import png, pyplot
from rewardkit.files.outputs import OutputSet
from rewardkit.loop.ledger import cost
from rewardkit.markdown import table
from rewardkit.rewards.answers import parse
from rewardkit.rewards.config import load_config
from rewardkit.rewards.think_length import ThinkLengthConfig
from rewardkit.runs.training.audit import COUNTS, Run, read_rollouts, step_figures

ZERO_VARIANCE_FLAG = 0.4
DRIVER_FLAG = 0.8
MAX_TURNS_FLAG = 0.5


def audit(
    run: Run, band: tuple[int, int] | None = None, price_per_mtok: tuple[float, float] | None = None
) -> dict[str, Any]:
    """Every step's figures, its think lengths against ``band`` (characters), its turns and, when the live
    diagnostics wrote ``rollouts.jsonl``, its episodes' endings and tools; and the flags."""
    episodes = read_rollouts(run.folder)
    steps = []
    for step in run.steps:
        figures = step_figures(step, run.weights, run.group_size, run.names)
        thinks = [len(parse(c).think or "") for c in step.completions]
        figures["think"] = {"mean": float(np.mean(thinks)), "band": list(band) if band else None}
        if band is not None:
            figures["think"]["inside"] = float(np.mean([band[0] <= n <= band[1] for n in thinks]))
        if step.turns is not None:
            counts = Counter(step.turns)
            figures["turns"] = {
                "mean": float(np.mean(step.turns)),
                "counts": {str(k): counts[k] for k in sorted(counts)},
            }
        if step.step in episodes:
            figures["episodes"] = {k: v for k, v in episodes[step.step].items() if k not in ("step", "turns")}
        steps.append(figures)
    return {
        "run": str(run.folder),
        "rewards": list(run.names),
        "weights": run.weights.tolist(),
        "num_generations": run.group_size,
        "steps": steps,
        "flags": flags(steps),
        "ledger": run_ledger(steps, price_per_mtok),
    }


def run_ledger(steps: Sequence[Mapping[str, Any]], price_per_mtok: tuple[float, float] | None) -> list[dict[str, Any]]:
    """Each model endpoint's calls over the run, from the steps' ledgers: counts and tokens summed, latency as the
    median of the steps' p50 and the largest of their p99 (the requests themselves are not kept)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for step in steps:
        for window in step.get("episodes", {}).get("ledger", []):
            key = (window["role"], str(window["endpoint"]))
            total = merged.setdefault(
                key, {"role": key[0], "endpoint": key[1], "p50s": [], "p99s": [], **dict.fromkeys(COUNTS, 0)}
            )
            for name in COUNTS:
                total[name] += window[name]
            if window["latency_s"]["p50"] is not None:
                total["p50s"].append(window["latency_s"]["p50"])
                total["p99s"].append(window["latency_s"]["p99"])
    out = []
    for total in merged.values():
        p50s, p99s = total.pop("p50s"), total.pop("p99s")
        total["latency_s"] = {"p50": float(np.median(p50s)) if p50s else None, "p99": max(p99s, default=None)}
        if price_per_mtok is not None:
            total["cost_usd"] = cost(total, price_per_mtok)
        out.append(total)
    return out


def write_audit(
    run: Run,
    out: Path,
    config: Path | None = None,
    extra: Mapping[str, Any] | None = None,
    json_path: Path | None = None,
    price_per_mtok: tuple[float, float] | None = None,
) -> tuple[dict[str, Any], str]:
    """Audit ``run`` with the think band of ``config`` (default ``$REWARDKIT_CONFIG``; a band in tokens is not
    drawn), and write ``out/audit.md``, ``out/audit.png`` and, with ``json_path``, every figure (plus ``extra``)."""
    think = load_config(path=config, sections=(ThinkLengthConfig,)).section(ThinkLengthConfig)
    band = (think.min, think.max) if think.unit == "chars" else None
    report = {**audit(run, band, price_per_mtok), **(extra or {})}
    text = markdown(report)
    png = dashboard(report)  # drawn before any output is replaced: the outputs land together or not at all
    with OutputSet() as outputs:
        outputs.write_text(out / "audit.md", text, "--out")
        outputs.write_bytes(out / "audit.png", png, "--out")
        if json_path is not None:
            outputs.write_text(json_path, json.dumps(_strict(report), indent=2, allow_nan=False) + "\n", "--json")
    return report, text


def _strict(value: Any) -> Any:
    """``value`` with every float that is not finite as None: what JSON can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def flags(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each pattern of the module docstring, once, at the first step that shows it."""
    found: dict[str, dict[str, Any]] = {}

    def flag(kind: str, step: int, message: str) -> None:
        found.setdefault(kind, {"flag": kind, "step": step, "message": message})

    first_turns = steps[0].get("turns", {}).get("mean") if steps else None
    first_calls = _calls_per_episode(steps[0]) if steps else None
    for s in steps:
        at = s["step"]
        if s["zero_variance"] >= ZERO_VARIANCE_FLAG:
            flag("no_gradient", at, f"{s['zero_variance']:.0%} of the groups have no variance: no advantage there")
        varying = [n for n, r in s["rewards"].items() if r["zero_variance"] < 1]
        if s["zero_variance"] == 1 and varying:
            flag("flat_total", at, f"every total is flat while {', '.join(varying)} varies: check reward_weights")
        for name, r in s["rewards"].items():
            if r["variance_share"] is not None and r["variance_share"] >= DRIVER_FLAG:
                flag("one_reward_drives", at, f"{name} carries {r['variance_share']:.0%} of the within-group variance")
            if name == "UserSimFailure" and (r["mean"] or 0) > 0:
                flag("simulator_failed", at, f"{r['mean']:.0%} of the episodes lost their simulated user")
        turns = s.get("turns", {}).get("mean")
        if first_turns and turns is not None and turns <= first_turns / 2:
            flag("turns_collapse", at, f"mean turns {turns:.1f}, from {first_turns:.1f} at the first step")
        calls = _calls_per_episode(s)
        if first_calls and calls is not None and calls <= first_calls / 2:
            flag("tools_skipped", at, f"{calls:.1f} tool calls per episode, from {first_calls:.1f} at the first step")
        if "episodes" in s and s["episodes"]["episodes"]:
            share = s["episodes"]["terminations"].get("max_turns", 0) / s["episodes"]["episodes"]
            if share >= MAX_TURNS_FLAG:
                flag("max_turns", at, f"{share:.0%} of the episodes ran out of turns instead of ending")
    return sorted(found.values(), key=lambda f: f["step"])


def _calls_per_episode(step: Mapping[str, Any]) -> float | None:
    episodes = step.get("episodes")
    if not episodes or not episodes["episodes"]:
        return None
    return sum(t["calls"] for t in episodes["tools"].values()) / episodes["episodes"]


def markdown(report: Mapping[str, Any]) -> str:
    """The summary: the run, the flags, then one row per step and one per reward of the last step."""
    steps = report["steps"]
    weights = ", ".join(f"{n} x{w:g}" for n, w in zip(report["rewards"], report["weights"], strict=True))
    lines = [
        f"# Audit of {report['run']}",
        "",
        f"{len(steps)} logged steps; groups of {report['num_generations']}; rewards: {weights}.",
        "",
        "## Flags",
        "",
    ]
    lines += [f"- **{f['flag']}** from step {f['step']}: {f['message']}" for f in report["flags"]] or ["- none"]
    header = ["step", "groups", "zero variance", "all correct", "all wrong", "think (chars)", "turns"]
    shares = ("zero_variance", "all_correct", "all_wrong")
    rows = [
        (s["step"], s["groups"], *(f"{s[k]:.2f}" for k in shares), f"{s['think']['mean']:.0f}", _num(_turns(s), 1))
        for s in steps
    ]
    lines += ["", "## Steps", "", *table(header, rows, right=range(7))]
    lines += _episode_rows(steps) + _ledger_rows(report.get("ledger", [])) + _step_check_rows(report.get("step_check"))
    if steps:
        last = steps[-1]
        header = ["reward", "mean", "std", "zero variance", "None rate", "share of the variance"]
        shares = ("zero_variance", "none_rate", "variance_share")
        rows = [
            (name, _num(r["mean"]), _num(r["std"]), *(_num(r[k], 2) for k in shares))
            for name, r in last["rewards"].items()
        ]
        lines += ["", f"## Rewards at step {last['step']}", "", *table(header, rows, right=range(1, 6))]
    return "\n".join(lines) + "\n"


def _step_check_rows(check: Mapping[str, Any] | None) -> list[str]:
    """The step check (runs.step_check): per step, sum A*d and the sign agreement, against the reward's advantages
    and the trainer's."""
    if check is None:
        return []
    lines = ["", "## Step check", ""]
    for kind, label in (("reward", f"the reward at weights {check['weights']}"), ("logged", "the logged advantages")):
        v = check[kind]
        if v is not None:
            p = "n/a" if v["p_right"] is None else f"{v['p_right']:.3g}"
            lines.append(
                f"- against {label}: **{v['verdict']}** ({v['groups_right']} of {v['groups']} groups "
                f"moved the right way, one-sided p {p}; mean A*d {v['objective']:+.4f})"
            )
    if check["momentum"] is not None:
        momentum = f"{check['momentum']:+.2f}"
        lines.append(
            f"- each update against the one before it: mean cosine {momentum} (near 1: the steps move where "
            "Adam's momentum points, and a step's sign speaks for earlier batches too)"
        )
    header = ["step", "A*d (reward)", "agree (reward)", "A*d (logged)", "agree (logged)", "cos(update, last)"]
    rows = [
        (s["step"], *(c for k in ("reward", "logged") for c in _check_cells(s.get(k))), _num(s.get("momentum")))
        for s in check["steps"]
    ]
    lines += ["", *table(header, rows, right=range(6))]
    if check["skipped"]:
        lines.append(f"\nSkipped (no checkpoint before and after): steps {check['skipped']}.")
    return lines


def _episode_rows(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The episodes' table, for steps the live diagnostics summed up."""
    logged = [s for s in steps if "episodes" in s]
    if not logged:
        return []
    header = ["step", "episodes", "excluded", "user flagged", "tool calls", "tool errors", "endings"]
    rows = []
    for s in logged:
        e = s["episodes"]
        endings = ", ".join(f"{k} {v}" for k, v in e["terminations"].items())
        calls = sum(t["calls"] for t in e["tools"].values())
        flagged = e.get("user_flagged", "-")  # runs from before the user review have no count
        rows.append((s["step"], e["episodes"], e["excluded"], flagged, calls, e["tool_errors"], endings))
    return ["", "## Episodes", "", *table(header, rows, right=range(6))]


def _ledger_rows(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    if not entries:
        return []
    header = ["role", "endpoint", "requests", "retries", "failed", "cached", "tokens", "p50 s", "cost"]
    rows = []
    for e in entries:
        counts = (e[k] for k in ("requests", "retries", "failures", "cache_hits"))
        price = f"${e['cost_usd']:.4f}" if "cost_usd" in e else ""
        tokens = f"{e['prompt_tokens']}+{e['completion_tokens']}"
        rows.append((e["role"], e["endpoint"], *counts, tokens, _num(e["latency_s"]["p50"]), price))
    return ["", "## Model endpoints", "", *table(header, rows, right=range(2, 9))]


def _num(value: float | None, places: int = 3) -> str:
    return "" if value is None else f"{value:.{places}f}"


def _turns(step: Mapping[str, Any]) -> float | None:
    return step["turns"]["mean"] if "turns" in step else None


def _check_cells(side: Mapping[str, Any] | None) -> tuple[str, str]:
    """A side of the step check: sum A*d and the sign agreement (empty where the step has none)."""
    return ("", "") if side is None else (f"{side['objective']:+.4f}", _num(side["agree"]))


def dashboard(report: Mapping[str, Any]) -> bytes:
    """Four panels, as PNG: the group shares, each reward's mean, its share of the variance, and turns or think
    length."""
    plt = pyplot()
    steps = report["steps"]
    x = [s["step"] for s in steps]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    shares = axes[0][0]
    for key, color in (("zero_variance", "#7f8c8d"), ("all_correct", "#27ae60"), ("all_wrong", "#c0392b")):
        shares.plot(x, [s[key] for s in steps], marker="o", color=color, label=key.replace("_", " "))
    shares.set(title="groups", ylim=(-0.05, 1.05), xlabel="step")
    shares.legend(fontsize=8)
    for name in report["rewards"]:
        axes[0][1].plot(x, [s["rewards"][name]["mean"] for s in steps], marker=".", label=name)
        axes[1][0].plot(x, [s["rewards"][name]["variance_share"] for s in steps], marker=".", label=name)
    axes[0][1].set(title="reward means", xlabel="step")
    axes[1][0].set(title="share of the within-group variance", xlabel="step")
    axes[0][1].legend(fontsize=7)
    last = axes[1][1]
    if "turns" in steps[-1]:
        counts = steps[-1]["turns"]["counts"]
        last.bar([int(k) for k in counts], list(counts.values()), color="#2980b9")
        last.set(title=f"turns at step {steps[-1]['step']}", xlabel="turns", ylabel="episodes")
    else:
        last.plot(x, [s["think"]["mean"] for s in steps], marker="o", color="#8e44ad")
        band = steps[-1]["think"]["band"]
        if band:
            last.axhspan(*band, color="#8e44ad", alpha=0.1, label="think_length band")
            last.legend(fontsize=8)
        last.set(title="mean think length (chars)", xlabel="step")
    fig.suptitle(f"GRPO audit: {Path(report['run']).name}")
    return png(fig, "the audit dashboard")
