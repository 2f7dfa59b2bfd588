"""``rewardkit calibrate think DATA``: propose ``think_length.min/max`` from the think lengths of your data.

``add_parsers(sub)`` adds ``calibrate``; its handler is ``cmd_calibrate_think``: measure the thinks of SFT or
teacher rows (characters, or the tokens of ``--tokenizer``), print the current band (the config's) against the
proposed one (``[floor(P_low), ceil(P_high)]``), each with the share of rows inside it and the mean ThinkLength
reward it gives them, and the YAML to paste. ``--plot`` draws the histogram under both S-curves.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rewardkit.cli.lint import _number


def add_parsers(sub: argparse._SubParsersAction) -> None:
    calibrate = sub.add_parser("calibrate", help="propose reward settings from your data")
    kinds = calibrate.add_subparsers(dest="action", required=True)
    think = kinds.add_parser("think", help="think_length.min/max from the percentiles of your data's think lengths")
    think.add_argument("data", type=Path, help="JSONL: teacher rows (output) or SFT rows (messages)")
    think.add_argument("--tokenizer", type=Path, metavar="DIR", help="count tokens of this local tokenizer")
    think.add_argument("--low", type=_number(0.0, 100.0), default=10.0, help="percentile of min (default 10)")
    think.add_argument("--high", type=_number(0.0, 100.0), default=90.0, help="percentile of max (default 90)")
    think.add_argument("--config", type=Path, help="the reward config (default: $REWARDKIT_CONFIG): the current band")
    think.add_argument("--plot", type=Path, metavar="PNG", help="also draw the histogram under the S-curves")
    think.add_argument("--json", type=Path, metavar="REPORT", help="also write the figures as JSON")
    think.set_defaults(func=cmd_calibrate_think)


def cmd_calibrate_think(args: argparse.Namespace) -> int:
    from rewardkit.files.outputs import OutputSet, check_outputs
    from rewardkit.rewards.config import load_config
    from rewardkit.rewards.think_length import ThinkLengthConfig
    from rewardkit.runs.training.calibrate import calibrate, plot

    given = [(flag, path) for flag, path in (("--plot", args.plot), ("--json", args.json)) if path is not None]
    check_outputs([("DATA", args.data), *([("--config", args.config)] if args.config else [])], given)
    cfg = load_config(path=args.config, sections=(ThinkLengthConfig,)).section(ThinkLengthConfig)
    tokenizer = None
    if args.tokenizer is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer), local_files_only=True)
    result = calibrate(args.data, cfg, args.low, args.high, tokenizer)
    report = result.as_dict()
    length = report["length"]
    print(
        f"calibrate think: {len(result.lengths)} thinks in {args.data} ({result.missing} rows without one), "
        f"in {result.unit}"
    )
    print(f"length: mean {length['mean']:.1f}, median {length['p50']:g}, range {length['min']}-{length['max']}")
    print(f"{'band':<10}{'min':>6}{'max':>6}{'inside':>9}{'mean ThinkLength':>18}")
    for name in ("current", "proposed"):
        band = report[name]
        print(f"{name:<10}{band['min']:>6}{band['max']:>6}{band['inside']:>9.3f}{band['mean_reward']:>18.3f}")
    print(f"proposed: [floor(P{result.low:g}), ceil(P{result.high:g})]; paste into your config:")
    print(result.yaml(), end="")
    if args.plot is not None:
        print(f"plot: {plot(result, args.plot)}")
    if args.json is not None:
        with OutputSet() as outputs:
            outputs.write_text(args.json, json.dumps(report, indent=2) + "\n", "--json")
    return 0
