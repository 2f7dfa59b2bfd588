"""B1 end to end on the merchant spec, run as a new user would: the spec copied, tasks generated into it and checked,
trajectories synthesised on simulated tools, then the tiny agent chain (cold-start SFT, GRPO against its control,
evaluation) on the result. Every step is a `rewardkit` command, printed before it runs.

    python experiments/b1_merchant.py --workdir runs/b1 [--n 60] [--seed 0] [--seeds 3] [--sign-test]

The tiny preset's model is random, so what it learns is small; the point is that every stage runs on a domain that is
only a spec, and every rejection is counted (docs/simulated_tools.md#end-to-end-on-the-merchant-spec).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RK = [sys.executable, "-m", "rewardkit.cli"]


def run(*args: str) -> None:
    print("$ rewardkit " + " ".join(args), flush=True)
    subprocess.run([*RK, *args], check=True, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--n", type=int, default=60, help="blueprints to sample (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="GRPO seeds of the chain (default 1)")
    parser.add_argument("--sign-test", action="store_true", help="the chain also trains on the inverted reward")
    args = parser.parse_args()
    work = args.workdir.resolve()
    spec = work / "merchant"
    if spec.exists():
        raise SystemExit(f"{spec} exists; pick a new --workdir")
    shutil.copytree(ROOT / "examples" / "merchant_spec", spec)
    described = json.loads((spec / "domain.json").read_text(encoding="utf-8"))
    described["name"] = "merchant_b1"
    (spec / "domain.json").write_text(json.dumps(described, ensure_ascii=False, indent=1), encoding="utf-8")
    # 1. Tasks: sampled from the tools and the seed, kept only once each gold replays and changes the memory.
    run(
        "tasks",
        "generate",
        "--domain",
        str(spec),
        "--model",
        "sample",
        "--n",
        str(args.n),
        "--seed",
        str(args.seed),
        "--out",
        str(spec / "generated.json"),
        "--report",
        str(work / "generate.json"),
    )
    # 2. The spec takes them beside its own; without `splits`, a fifth is held out by the hash of each id.
    described["tasks"] = ["tasks.json", "generated.json"]
    described.pop("splits")
    (spec / "domain.json").write_text(json.dumps(described, ensure_ascii=False, indent=1), encoding="utf-8")
    run("env", "check", str(spec), "--json", str(work / "check.json"))
    # 3. Trajectories on the simulated tools, verified by the rule training uses.
    run(
        "synth",
        "agent",
        "--agent",
        "gold",
        "--domain",
        str(spec),
        "--tools",
        "simulated",
        "--no-progress",
        "--out",
        str(work / "sft.jsonl"),
        "--report",
        str(work / "synth.json"),
    )
    # 4. The tiny chain on the spec: cold-start SFT, GRPO and its no-learning control, evaluation.
    run(
        "recipe",
        "run",
        "agent",
        "--domain",
        str(spec),
        "--preset",
        "tiny",
        "--baseline",
        "--seeds",
        str(args.seeds),
        *(["--sign-test"] if args.sign_test else []),
        "--workdir",
        str(work / "chain"),
    )


if __name__ == "__main__":
    main()
