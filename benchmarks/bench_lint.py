"""What `rewardkit lint` costs beside what it checks, as ratios in one run.

    python benchmarks/bench_lint.py            # --quick: 16 rows and 2 tasks, for CI

1. ``lint RECIPE``: the bundled planning set (recipes/planning/tiny_grpo.yaml) on the 160 GRPO rows built from
   examples/planning/annotated_p1.jsonl, per completion scored (each gold and its probes), against the reward
   stack's own cost: the seven rewards each scoring the same completions in one batch, as a GRPO step does.
2. ``lint tokens``: synthesised tau2 rows (`rewardkit synth agent --agent gold`, 8 tasks) per row, against ms-swift's
   own ``template.encode`` of the same rows.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from _timing import best_of, quick_flag

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def bench_recipe(tmp: Path, quick: bool) -> tuple[str, float, float, int]:
    from rewardkit.data_builders import InputSpec
    from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo
    from rewardkit.lint.preflight import lint_recipe
    from rewardkit.lint.recipe import build_rewards, read_recipe
    from rewardkit.recipes import EXAMPLES, recipe_path
    from rewardkit.rewards.answers import load_schema
    from rewardkit.testing import probes, score

    rows, _ = build_grpo([InputSpec(EXAMPLES / "annotated_p1.jsonl", None)], GrpoOptions())
    rows = rows[:16] if quick else rows
    data = tmp / "grpo.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    recipe = recipe_path("planning/tiny_grpo.yaml")
    spec = read_recipe(recipe)
    rewards, cfg = build_rewards(spec)
    from rewardkit.lint.gold import with_gold

    golds, _ = with_gold(rows, tool_use=False, schema=load_schema(cfg.schema, cfg.schema_keys), where="bench")
    samples = [s for g in golds for s in (g, *probes(g, tool_use=False).values())]
    lint_s = best_of(lambda: lint_recipe(recipe, data))
    stack_s = best_of(lambda: [score(r, samples) for r in rewards.values()])
    return (
        "lint RECIPE, planning tiny_grpo (per completion)",
        lint_s / len(samples),
        stack_s / len(samples),
        len(samples),
    )


def bench_tokens(tmp: Path, quick: bool) -> tuple[str, float, float, int]:
    from rewardkit.cli import main
    from rewardkit.envs import get_domain
    from rewardkit.files.jsonl import read_jsonl
    from rewardkit.lint.tokens import lint_rows, load_template, preprocess
    from rewardkit.pipelines.tiny_model import build_tiny_model

    domain = get_domain("retail")
    model = build_tiny_model(tmp / "tiny", [domain.policy() + json.dumps(domain.tool_specs())], max_positions=16384)
    out = tmp / "sft.jsonl"
    synth = ["synth", "agent", "--agent", "gold", "--user", "scripted", "--no-progress", "--out", str(out)]
    main([*synth, "--limit", "2" if quick else "8"])
    rows = read_jsonl(out)
    template = load_template(model)
    encoded = preprocess(rows)
    lint_s = best_of(lambda: lint_rows(template, rows))
    encode_s = best_of(lambda: [template.encode(r) for r in encoded])
    return "lint tokens, synthesised tau2 rows (per row)", lint_s / len(rows), encode_s / len(rows), len(rows)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        quick = quick_flag(__doc__)
        results = [bench_recipe(Path(tmp), quick), bench_tokens(Path(tmp), quick)]
    print(f"{'':<50}{'lint':>12}{'own cost':>12}{'ratio':>8}{'n':>6}")
    for name, lint_s, own_s, n in results:
        print(f"{name:<50}{lint_s * 1e3:>10.3f}ms{own_s * 1e3:>10.3f}ms{lint_s / own_s:>7.1f}x{n:>6}")


if __name__ == "__main__":
    main()
