"""Per-rollout isolation of the retail database: the template's pages deserialised vs deep-copying the JSON.

python benchmarks/bench_retail_copy.py            # --quick: small sizes, for CI
"""

from __future__ import annotations

import copy
import json

from _timing import per_call, quick_flag

from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.retail.db import TABLES


def main() -> None:
    scale = 10 if quick_flag(__doc__) else 1
    TABLES.template()  # built once per process
    raw = json.loads((DATA_DIR / "db.json").read_text(encoding="utf-8"))
    naive = per_call(lambda: copy.deepcopy(raw), 10 // scale)
    ours = per_call(TABLES.copy, 100 // scale)
    print("| copy of the 500-user / 1000-order database | ms per rollout |\n|---|---:|")
    print(f"| copy.deepcopy of the parsed db.json | {naive * 1e3:.2f} |")
    print(f"| the template's SQLite pages deserialised into :memory: | {ours * 1e3:.3f} |")
    print(f"| speed-up | {naive / ours:.0f}x |")


if __name__ == "__main__":
    main()
