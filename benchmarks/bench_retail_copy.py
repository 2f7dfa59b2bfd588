"""Per-rollout isolation of the retail database: SQLite backup API vs deep-copying the JSON.

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
    ours = per_call(lambda: TABLES.copy().close(), 100 // scale)  # closed, as a rollout closes its copy
    print("| copy of the 500-user / 1000-order database | ms per rollout |\n|---|---:|")
    print(f"| copy.deepcopy of the parsed db.json | {naive * 1e3:.2f} |")
    print(f"| SQLite backup API into :memory: (and closed) | {ours * 1e3:.3f} |")
    print(f"| speed-up | {naive / ours:.0f}x |")


if __name__ == "__main__":
    main()
