"""``rewardkit audit RUN_DIR``: what a GRPO run's groups and rewards did, read from ms-swift's own files.

``add_parsers(sub)`` adds ``audit``; its handler is ``cmd_audit``: print the summary (flags, then a row per step),
write it as ``audit.md`` with the dashboard ``audit.png`` into ``--out`` (default ``RUN_DIR/audit``), and the
figures as JSON with ``--json`` (strict JSON: a figure that is not finite is null). No output may be a file it
reads (the run's, the config); the outputs land together or not at all. ``--weights`` or ``--normalize`` also
reports what other weights, or normalising each reward within its group first (GDPO), would change in the logged
groups, before anyone relaunches.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rewardkit.cli.synth import _add_price
from rewardkit.config import ENV_VAR


def add_parsers(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="group shares, reward variance, turns and flags of a GRPO run")
    audit.add_argument("run", type=Path, help="a swift rlhf --output_dir (run with --log_completions true)")
    audit.add_argument("--out", type=Path, help="folder for audit.md and audit.png (default: RUN/audit)")
    audit.add_argument("--json", type=Path, metavar="REPORT", help="also write every figure as JSON")
    audit.add_argument(
        "--config", type=Path, help="the run's reward config, for the think band (default: $REWARDKIT_CONFIG)"
    )
    _add_price(audit)
    plan = audit.add_mutually_exclusive_group()
    plan.add_argument(
        "--weights", type=_weights, help="plan: other reward_weights, comma-separated, in the run's order"
    )
    plan.add_argument("--normalize", action="store_true", help="plan: normalise each reward within its group (GDPO)")
    audit.add_argument(
        "--step-check",
        nargs="?",
        const="run",
        type=_step_weights,
        metavar="WEIGHTS",
        help="did each update make the rollouts with a positive advantage more likely? Reads the "
        "checkpoint after every step (--save_steps 1); WEIGHTS: the reward's, comma-separated "
        "(default: the run's)",
    )
    audit.set_defaults(func=cmd_audit)


def _weights(text: str) -> list[float]:
    from rewardkit.runs.training.audit import MAX_WEIGHT, weight

    values = [weight(part) for part in text.split(",")]
    if None in values:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not comma-separated finite weights (each from -{MAX_WEIGHT:,.0f} to {MAX_WEIGHT:,.0f})"
        )
    return values


def _step_weights(text: str) -> list[float] | str:
    return text if text == "run" else _weights(text)


def _one_per_reward(flag: str, weights: list[float] | None, names: tuple[str, ...]) -> None:
    """A weights flag holds one weight per reward of the run, in its order."""
    from rewardkit.runs.training.audit import AuditError

    if weights is not None and len(weights) != len(names):
        raise AuditError(f"{flag}: {len(weights)} weights for the run's {len(names)} rewards {names}")


def cmd_audit(args: argparse.Namespace) -> int:
    import numpy as np

    from rewardkit.files.outputs import check_outputs
    from rewardkit.runs.training.audit import find_run, load_run, reweigh, run_inputs
    from rewardkit.runs.training.audit_report import write_audit

    folder = find_run(args.run)
    out = args.out if args.out is not None else folder / "audit"
    config = ("--config", args.config) if args.config else None
    if config is None and os.environ.get(ENV_VAR):
        config = (f"${ENV_VAR}", Path(os.environ[ENV_VAR]))
    outputs = [("--out", out / "audit.md"), ("--out", out / "audit.png"), ("--json", args.json) if args.json else None]
    check_outputs([*run_inputs(folder), config], outputs)  # before anything is read
    run = load_run(folder)
    extra = {}
    if args.weights is not None or args.normalize:
        _one_per_reward("--weights", args.weights, run.names)
        weights = None if args.weights is None else np.array(args.weights)
        extra["plan"] = {"weights": args.weights, "normalize": args.normalize, **reweigh(run, weights, args.normalize)}
    if args.step_check is not None:
        from rewardkit.runs.training.step_check import step_check

        chosen = None if args.step_check == "run" else args.step_check
        _one_per_reward("--step-check", chosen, run.names)
        extra["step_check"] = step_check(run, None if chosen is None else np.array(chosen))
    price = tuple(args.price) if args.price else None
    report, text = write_audit(run, out, args.config, extra, args.json, price)
    print(text, end="")
    if "plan" in report:
        plan = report["plan"]
        print(
            f"\nplan ({'GDPO: normalise, then sum' if args.normalize else f'weights {args.weights}'}): "
            f"{plan['rankings_flipped']} of {plan['groups']} group rankings flip ({plan['pairs_flipped']} pairs); "
            f"{plan['gain_variance']} groups gain variance, {plan['lose_variance']} lose it"
        )
    if "step_check" in report:
        for kind in ("reward", "logged"):
            v = report["step_check"][kind]
            if v is not None:
                print(
                    f"step check, {kind} advantages: {v['verdict']} ({v['groups_right']} of {v['groups']} groups "
                    f"the right way; mean A*d {v['objective']:+.4f})"
                )
        if report["step_check"]["momentum"] is not None:
            print(
                f"step check, each update against the one before: mean cosine {report['step_check']['momentum']:+.2f}"
            )
    print(f"\nwrote {out / 'audit.md'} and {out / 'audit.png'}")
    return 0
