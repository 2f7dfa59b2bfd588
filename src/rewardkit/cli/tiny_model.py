"""``rewardkit tiny-model OUT``: build the offline tiny Qwen3 that the CPU presets and the tests train.

``add_parsers(sub)`` adds ``tiny-model``; its handler is ``cmd_tiny_model``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rewardkit.recipes import EXAMPLES


def add_parsers(sub: argparse._SubParsersAction) -> None:
    tiny = sub.add_parser("tiny-model", help="build the offline tiny Qwen3 used by the CPU preset and tests")
    tiny.add_argument("out", type=Path)
    tiny.add_argument("--data", type=Path, default=EXAMPLES, help="*.jsonl corpus for the tokenizer (default: bundled)")
    tiny.set_defaults(func=cmd_tiny_model)


def cmd_tiny_model(args: argparse.Namespace) -> int:
    from rewardkit.pipelines.chain import TINY_MODEL
    from rewardkit.pipelines.planning import planning_corpus
    from rewardkit.pipelines.stages import PipelineError
    from rewardkit.pipelines.tiny_model import build_tiny_model

    # The output is checked before anything is read: an unwritable OUT fails now, not after the training.
    if args.out.exists() and not args.out.is_dir():
        raise PipelineError(f"{args.out}: exists and is not a directory")
    created = not args.out.exists()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PipelineError(f"{args.out}: cannot create the output directory ({exc.strerror or exc})") from None
    try:
        corpus = planning_corpus(args.data.resolve())  # an empty corpus raises: no 261-token model
    except Exception:
        if created:
            args.out.rmdir()
        raise
    out = build_tiny_model(args.out, corpus, **TINY_MODEL)
    print(out)
    return 0
