"""The harness's cost per call on the live-stream domain, gates included: each call timed alone, p50 and p99.

python benchmarks/bench_harness.py            # --quick: 50 calls of each kind, for CI

What a call through ``env.call`` costs beyond the tool itself: the schema check, the idempotency lookup, the gate
checks, the transaction and the audit row. The tool alone is the same function called on the same connection.
Each kind of call runs ``N`` times on one environment; the soft-gated write is asked, approved by the user-side
tool, and sent again, and only the approved run is timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from _timing import quick_flag

from rewardkit.envs import get_domain

N = 2000  # calls of each kind (--quick: 50)


def timed(fn: Callable[[], object], n: int) -> np.ndarray:
    """Seconds of each of ``n`` calls of ``fn``."""
    out = np.empty(n)
    for i in range(n):
        start = time.perf_counter()
        fn()
        out[i] = time.perf_counter() - start
    return out


def main() -> None:
    n = 50 if quick_flag(__doc__) else N
    domain = get_domain("livestream")
    rows = []
    with domain.make_env(None) as env:
        tool = domain.tools["get_product"].fn
        rows.append(
            (
                "read: get_product",
                timed(lambda: env.call("get_product", {"sku": "SP006"}), n),
                timed(lambda: tool(env.conn, sku="SP006"), n),
            )
        )
        keys = iter(range(10**9))
        card = {"room_id": "R101", "sku": "SP001", "content": "今晚直播间89元。"}
        write = domain.tools["write_cue_card"].fn
        rows.append(
            (
                "write, no gate: write_cue_card",
                timed(lambda: env.call("write_cue_card", {**card, "idempotency_key": f"c{next(keys)}"}), n),
                timed(lambda: write(env.conn, **card), n),
            )
        )
        prices = iter([89, 99] * n)

        def approved() -> Callable[[], object]:
            call = {"sku": "SP006", "new_price": next(prices), "idempotency_key": f"p{next(keys)}"}
            held = env.call("change_price", call)
            env.user_call("approve_request", {"request_id": held.value["error"]["request_id"]})
            return lambda: env.call("change_price", call)

        soft = np.array([timed(approved(), 1)[0] for _ in range(n)])
        rows.append(("write, soft gate approved: change_price", soft, None))
        below_cost = {"sku": "SP006", "new_price": 1, "idempotency_key": "x"}
        rows.append(
            ("write, hard gate refused: change_price", timed(lambda: env.call("change_price", below_cost), n), None)
        )
    print(f"| call ({n} each, one environment) | p50 ms | p99 ms | the tool alone, p50 ms | p99 - tool p50, ms |")
    print("|---|---:|---:|---:|---:|")
    for name, calls, alone in rows:
        p50, p99 = np.percentile(calls, [50, 99]) * 1e3
        base = float(np.percentile(alone, 50) * 1e3) if alone is not None else None
        over = f"{p99 - base:.3f}" if base is not None else "n/a"
        print(f"| {name} | {p50:.3f} | {p99:.3f} | {'n/a' if base is None else f'{base:.3f}'} | {over} |")


if __name__ == "__main__":
    main()
