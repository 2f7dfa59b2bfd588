"""Where a reward runs: pickled into ms-swift's and TRL's workers, 64 threads at once, and TRL's conversational
completions. Each check compares with the batch's scores (:meth:`Context.baseline`)."""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rewardkit.testing.checks import Context, compare, guarded, mutation
from rewardkit.testing.report import Check

THREADS = 64


def check_pickle(ctx: Context) -> Check:
    def body() -> Check:
        expected, n = ctx.baseline(), len(ctx.rows)
        fresh = pickle.loads(pickle.dumps(ctx.reward))
        got = Context(fresh, ctx.rows, ctx.declared).run()
        return compare(ctx, "pickle", got, expected, "a pickled copy", range(n))

    return guarded("pickle", body, ctx)


def check_threads(ctx: Context) -> Check:
    """64 threads at once, each on the rows rotated by its index: a reward keeping per-call state on ``self``
    mixes one call's inputs into another's scores."""

    def body() -> Check:
        expected, n = ctx.baseline(), len(ctx.rows)
        orders = [[(i + k) % n for i in range(n)] for k in range(THREADS)]
        start = threading.Barrier(THREADS)

        def one(order: list[int]) -> Any:
            rows = ctx.copied([ctx.rows[i] for i in order])
            start.wait(timeout=60)
            return ctx.run(rows)

        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            results = list(pool.map(one, orders))
        for k, (order, got) in enumerate(zip(orders, results, strict=True)):
            check = compare(ctx, "threads", got, [expected[i] for i in order], f"in thread {k} of {THREADS}", order)
            if not check.passed:
                return check
        return Check("threads", True, f"{THREADS} concurrent calls agree with the serial one")

    return guarded("threads", body, ctx)


def check_conversational(ctx: Context) -> Check:
    """TRL's conversational completions score as the strings do, and the reward leaves every message as it was."""

    def body() -> Check:
        expected, n = ctx.baseline(), len(ctx.rows)
        problem = mutation(ctx, True)
        if problem is not None:
            return Check("conversational", False, problem)
        got = ctx.run(conversational=True)
        what = "completions as TRL's [{'role': 'assistant', …}]"
        return compare(ctx, "conversational", got, expected, what, range(n))

    return guarded("conversational", body, ctx)
