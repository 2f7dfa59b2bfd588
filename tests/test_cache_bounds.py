"""The caches are bounded in bytes, evict the least recently used, and still share a batch across the rewards."""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import E5, GOLD, answer, completion, step

from rewardkit.envs import task_verdict
from rewardkit.envs.retail.domain import tasks
from rewardkit.files.cache import (
    ENTRY_OVERHEAD,
    ENV,
    MISS,
    SMALL_BUDGET,
    ByteLRU,
    budget_from_env,
)
from rewardkit.files.sizes import approx_size, key_size
from rewardkit.rewards import PLANNING_REWARDS
from rewardkit.rewards._parsing import COMPLETIONS, answer_plan, parse, read_plan
from rewardkit.rewards._rows import RowCache

KIB, MIB = 1 << 10, 1 << 20
SEVEN = [cls for key, cls in PLANNING_REWARDS.items() if key != "answer_format"]  # the planner's seven rewards
CJK = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 500))


def big_completion(i: int, chars: int = 10_000) -> str:
    """A unique completion of about 30 KB (UTF-8): a long CJK think and a valid one-step answer."""
    rng = random.Random(i)
    think = f"第{i}条：" + "".join(rng.choice(CJK) for _ in range(chars))
    return completion(think, answer("查看经营周报", step("数据分析专家", "查看经营周报")))


def run_threads(work: Any, n: int) -> None:
    """``work(seed)`` in ``n`` threads at once; returns when all are done."""
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def check_accounting(store: ByteLRU) -> None:
    """The store's own count is the sum of its entries, within budget, and no less than what they really hold."""
    entries = list(store._entries.items())
    assert store.nbytes == sum(e.cost for _, e in entries)
    assert store.nbytes <= store.budget
    assert store.maxsize is None or len(entries) <= store.maxsize
    held = sum(sys.getsizeof(k) + sum(approx_size(v) for v in e.slots.values()) for k, e in entries)
    assert store.nbytes >= held


@pytest.fixture
def completions_budget() -> Iterator[ByteLRU]:
    """The shared completion cache, emptied; its budget is restored afterwards."""
    budget, maxsize = COMPLETIONS.budget, COMPLETIONS.maxsize
    COMPLETIONS.clear()
    yield COMPLETIONS
    COMPLETIONS.configure(budget=budget)
    COMPLETIONS.maxsize = maxsize
    COMPLETIONS.clear()


class TestByteLRU:
    def test_never_holds_more_than_its_budget(self) -> None:
        store = ByteLRU(budget=1 * MIB)
        for i in range(200):  # 200 x ~60 KB (UCS-2 text plus a copy): ten times the budget
            text = f"{i}:" + CJK * 60
            store.store(text, {"think": text[1:], "n": i})
            check_accounting(store)
        assert 8 <= len(store) < 200
        assert store.evictions == 200 - len(store)

    def test_entry_cost_counts_key_and_value(self) -> None:
        store = ByteLRU(budget=1 * MIB)
        key, value = "k" * 10_000, ["v" * 20_000]
        store.store(key, value)
        assert store.nbytes == ENTRY_OVERHEAD + key_size(key) + approx_size(value)
        assert store.nbytes > 30_000

    def test_evicts_the_least_recently_used(self) -> None:
        one = ENTRY_OVERHEAD + key_size("a") + approx_size("x" * 1000)
        store = ByteLRU(budget=3 * one + 10, max_entry_share=1.0)
        for key in "abc":
            store.store(key, "x" * 1000)
        assert store.lookup("a") == "x" * 1000  # "a" is now the most recently used
        store.store("d", "x" * 1000)
        assert store.keys() == ["c", "a", "d"]  # "b" went
        assert store.lookup("b") is MISS
        check_accounting(store)

    def test_entry_limit_still_applies(self) -> None:
        store = ByteLRU(budget=MIB, maxsize=2)
        for key in "abc":
            store.store(key, key)
        assert store.keys() == ["b", "c"]

    def test_an_entry_over_its_share_is_returned_not_kept(self) -> None:
        store = ByteLRU(budget=MIB)  # at most 128 KiB per entry
        calls = []
        for _ in range(2):
            assert store.get("huge", lambda: calls.append(1) or "y" * (200 * KIB)) == "y" * (200 * KIB)
        assert len(calls) == 2 and len(store) == 0 and store.nbytes == 0 and store.oversize == 2

    def test_a_budget_of_zero_keeps_nothing(self) -> None:
        store = ByteLRU(budget=0)
        assert store.get("k", lambda: 1) == 1
        assert len(store) == 0

    def test_shrinking_the_budget_evicts_at_once(self) -> None:
        store = ByteLRU(budget=MIB)
        for i in range(50):
            store.store(str(i), "z" * 5000)
        store.configure(budget=20 * KIB)
        check_accounting(store)
        assert store.keys()[-1] == "49"

    def test_slots_share_one_key(self) -> None:
        store = ByteLRU(budget=MIB)
        text = "t" * 50_000
        store.store(text, "parse")
        before = store.nbytes
        store.store(text, "plan", slot="plan")
        assert store.nbytes - before < 1000  # the long text is counted once
        assert store.lookup(text) == "parse" and store.lookup(text, "plan") == "plan"
        assert store.lookup(text, "other") is MISS

    def test_thread_safe_under_8_threads(self) -> None:
        store = ByteLRU(budget=256 * KIB)
        errors: list[BaseException] = []
        barrier = threading.Barrier(8)

        def work(seed: int) -> None:
            rng = random.Random(seed)
            try:
                barrier.wait()
                for _ in range(3000):
                    k = rng.randrange(400)  # overlapping keys: hits, misses, races on the same key
                    value = store.get(f"key-{k}", lambda k=k: "v" * (100 + 20 * k))
                    assert value == "v" * (100 + 20 * k)
                    if rng.random() < 0.05:
                        store.configure(budget=rng.choice([128, 256]) * KIB)
            except BaseException as exc:
                errors.append(exc)

        run_threads(work, 8)
        assert not errors
        check_accounting(store)
        assert store.evictions > 0


class TestBudgetFromEnv:
    @pytest.mark.parametrize(("raw", "expected"), [("", 64 * MIB), ("0.5", MIB // 2), ("0", 0), (" 128 ", 128 * MIB)])
    def test_values(self, raw: str, expected: int) -> None:
        assert budget_from_env({ENV: raw}) == expected

    @pytest.mark.parametrize("raw", ["lots", "-1", "inf", "nan"])
    def test_bad_values_name_the_variable(self, raw: str) -> None:
        with pytest.raises(ValueError, match=r"\$REWARDKIT_CACHE_MB="):
            budget_from_env({ENV: raw})

    def test_the_default_is_the_one_a_bad_value_reports(self) -> None:
        # Unset and empty both mean the default; the message for a bad value says which default that is.
        assert budget_from_env({}) == budget_from_env({ENV: ""}) == 64 * MIB
        with pytest.raises(ValueError, match=r"default 64;"):
            budget_from_env({ENV: "lots"})


class TestCompletionCache:
    def test_bounded_in_bytes(self, completions_budget: ByteLRU) -> None:
        completions_budget.configure(budget=1 * MIB)  # about 50 of these completions
        schema = SEVEN[0]().schema
        for i in range(120):
            text = big_completion(i, 5000)
            assert read_plan(text, schema) is not None
            check_accounting(completions_budget)
        assert 10 < len(completions_budget) < 120
        assert completions_budget.nbytes >= len(completions_budget) * 2 * 5000  # the texts really are counted

    def test_seven_rewards_parse_each_completion_once_when_the_cache_is_full(
        self, completions_budget: ByteLRU, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Room for about two batches of 64 completions of ~30 KB: every batch evicts the one before last.
        completions_budget.configure(budget=6 * MIB)
        assert len(SEVEN) == 7
        rewards = [cls() for cls in SEVEN]
        parsed: list[str] = []
        split = parse._fn

        def counting(text: str) -> Any:
            parsed.append(text)
            return split(text)

        monkeypatch.setattr(parse, "_fn", counting)
        for b in range(4):
            batch = [big_completion(64 * b + i) for i in range(64)]
            parsed.clear()
            for reward in rewards:
                scores = reward(batch, solution=[GOLD] * 64, experts=[E5] * 64)
                assert len(scores) == 64
            assert sorted(parsed) == sorted(batch)  # each completion split and decoded once across the seven
            check_accounting(completions_budget)
        assert completions_budget.evictions > 0

    def test_scores_do_not_depend_on_the_budget(self, completions_budget: ByteLRU) -> None:
        batch = [big_completion(i, 2000) for i in range(16)] + ["xyz", completion("短", "{}")]
        columns = {"solution": [GOLD] * len(batch), "experts": [E5] * len(batch)}
        rewards = [cls() for cls in SEVEN]
        cached = [r(batch, **columns) for r in rewards]
        completions_budget.configure(budget=0)  # nothing kept: every call parses afresh
        assert [r(batch, **columns) for r in rewards] == cached

    def test_thread_safe_under_8_threads(self, completions_budget: ByteLRU) -> None:
        completions_budget.configure(budget=1 * MIB)
        texts = [big_completion(i, 1500) for i in range(60)]
        schema = SEVEN[0]().schema
        expected = [(parse._fn(t), answer_plan._fn(parse._fn(t).answer, schema)) for t in texts]
        errors: list[BaseException] = []

        def work(seed: int) -> None:
            rng = random.Random(seed)
            try:
                for _ in range(400):
                    i = rng.randrange(len(texts))
                    assert (parse(texts[i]), read_plan(texts[i], schema)) == expected[i]
            except BaseException as exc:
                errors.append(exc)

        run_threads(work, 8)
        assert not errors
        check_accounting(completions_budget)


class TestRowCaches:
    def test_row_cache_is_bounded_in_bytes(self) -> None:
        cache = RowCache(budget=256 * KIB)
        for i in range(100):
            key = f"{i}" + "r" * 20_000  # rows with long cells
            assert cache.get(key, lambda i=i: i) == i
            check_accounting(cache.store)
        assert cache.validations == 100 and len(cache._values) < 20
        assert cache.get(key, lambda: -1) == 99  # the latest row is still there

    def test_task_verdicts_are_bounded_and_shared(self) -> None:
        store = task_verdict.VERDICTS
        assert store.maxsize == 4096 and store.budget == SMALL_BUDGET
        task = tasks()["0"]
        first = task_verdict.gold_outcome("retail", task)
        assert task_verdict.gold_outcome("retail", task) is first  # replayed once
        check_accounting(store)


@pytest.mark.parametrize("fails", [False, True])
def test_threads_missing_one_key_compute_it_once(fails: bool) -> None:
    """16 threads miss one key together. Healthy: one computes, 15 wait and read its value (calls == 1).
    The computing thread raises: it alone sees the error; one waiter takes over (calls == 2: 1 failed + 1),
    the other 14 read the value it stored."""
    cache, calls, started = ByteLRU(budget=MIB), [], threading.Barrier(16)
    leader_done = threading.Event()

    def compute() -> str:
        calls.append(threading.get_ident())
        if len(calls) == 1:
            leader_done.wait(0.2)  # the others arrive meanwhile and wait on this computation
            if fails:
                raise RuntimeError("gold replay failed")
        return "value"

    results: list[object] = []

    def worker() -> None:
        started.wait()
        try:
            results.append(cache.get("task-1", compute))
        except RuntimeError as exc:
            results.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r for r in results if isinstance(r, RuntimeError)]
    assert len(calls) == (2 if fails else 1)
    assert len(errors) == (1 if fails else 0) and results.count("value") == (15 if fails else 16)
    assert cache.lookup("task-1") == "value"


def test_a_value_keep_refuses_is_shared_by_its_waiters_and_not_stored() -> None:
    """16 threads miss one key whose value ``keep`` refuses (the tools were down): one computes, the 15 waiting
    share its value (calls == 1), and nothing is stored, so the next miss computes again (calls == 2)."""
    cache, calls, started = ByteLRU(budget=MIB), [], threading.Barrier(16)

    def compute() -> str:
        calls.append(1)
        time.sleep(0.2)  # the others arrive meanwhile and wait on this computation
        return "down"

    results: list[str] = []

    def worker() -> None:
        started.wait()
        results.append(cache.get("task-1", compute, keep=lambda value: value != "down"))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(calls), results.count("down"), cache.lookup("task-1")) == (1, 16, MISS)
    assert cache.get("task-1", compute, keep=lambda value: value != "down") == "down" and len(calls) == 2
