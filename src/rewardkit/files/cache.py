"""Byte-bounded, thread-safe LRU caches: what rewardkit keeps from one batch to the next (the rewards' parses
and checked rows, the environments' gold outcomes).

The rewards of one GRPO batch read the same completions and the same dataset
rows, so each is parsed or validated once and shared. What outlives the batch
is bounded in **bytes**, not in entries: a 30 KB completion and a 3 MB
multi-turn transcript do not cost the same.

Budget: ``$REWARDKIT_CACHE_MB`` (default 64, read once at import; 0 keeps
nothing beyond the current call) is the budget of the completion cache
(``parse``/``read_plan``); each of the smaller caches (dataset rows per reward
family, think bands, gold outcomes) gets a quarter of it. Together they
hold at most ``2 x $REWARDKIT_CACHE_MB`` MiB.

How an entry is counted: the key (``sys.getsizeof`` of its strings; other key
parts such as a schema object are shared configuration, not owned by the
cache) plus a deep ``sys.getsizeof`` of the value (:func:`~rewardkit.files.sizes.approx_size`: it
walks containers and dataclasses, so a value held twice is counted twice, an
over-estimate) plus a fixed per-entry overhead. An entry costing more than
``max_entry_share`` (1/8) of the budget is returned but not kept: such
completions are re-parsed by every reward that reads them, which is cheap next
to having generated them.

Values are computed outside the lock, so a slow computation never blocks the
other threads. Two threads missing a memoized function's key at once may both
compute it (as with ``functools.lru_cache``; the first stored value wins);
``ByteLRU.get`` computes a key once while the other threads missing it wait.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, NamedTuple, ParamSpec, TypeVar

from rewardkit.files.sizes import approx_size, key_size

ENV = "REWARDKIT_CACHE_MB"
DEFAULT_MB = 64.0
MAX_ENTRY_SHARE = 1 / 8
MIB = 1 << 20

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
MISS: Any = object()  # a lookup found nothing (None is a value that can be cached)

# An entry's own bookkeeping: its OrderedDict node, the slot dict and the entry object.
ENTRY_OVERHEAD = 100 + sys.getsizeof({None: None}) + 64


def budget_from_env(environ: Mapping[str, str] = os.environ) -> int:
    """The completion cache's budget in bytes: ``$REWARDKIT_CACHE_MB`` MiB (default 64)."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return int(DEFAULT_MB * MIB)
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not 0 <= mb < float("inf"):
        raise ValueError(f"${ENV}={raw!r}: must be a number of MiB >= 0 (default {DEFAULT_MB:g}; 0 keeps nothing)")
    return int(mb * MIB)


BUDGET = budget_from_env()  # bytes, for the completion cache
SMALL_BUDGET = BUDGET // 4  # bytes, for each row / gold-outcome cache


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int  # entries in the store
    nbytes: int  # their cost, as the store counts it
    budget: int


class _Entry:
    __slots__ = ("cost", "slots")

    def __init__(self, cost: int, slots: dict[Hashable, Any]) -> None:
        self.cost = cost
        self.slots = slots


class _Flight:
    """A computation in progress: its waiters wake when it ends, and see whether it raised, or the value it gave
    when that value is not to be kept."""

    __slots__ = ("done", "raised", "unkept")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.raised = False
        self.unkept: Any = MISS


class ByteLRU:
    """A thread-safe LRU map bounded by the bytes its entries cost (and optionally by their number).

    Each key holds one or more *slots* (``slot=None`` for a plain map): the
    completion cache keys by the completion text and keeps its parse and its
    plan per schema side by side, so the text is counted once.
    """

    def __init__(
        self, budget: int = BUDGET, maxsize: int | None = None, max_entry_share: float = MAX_ENTRY_SHARE
    ) -> None:
        self.budget = budget
        self.maxsize = maxsize
        self.max_entry_share = max_entry_share
        self.nbytes = 0
        self.evictions = 0
        self.oversize = 0  # values returned but not kept: larger than max_entry_share of the budget
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._flights: dict[Hashable, _Flight] = {}  # the keys being computed now
        self._lock = threading.Lock()

    @property
    def max_entry(self) -> int:
        return int(self.budget * self.max_entry_share)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def keys(self) -> list[Hashable]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def lookup(self, key: Hashable, slot: Hashable = None) -> Any:
        """The value stored for ``key`` (and ``slot``), marking the key most recently used; else ``MISS``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return MISS
            self._entries.move_to_end(key)
            return entry.slots.get(slot, MISS)

    def store(self, key: Hashable, value: Any, slot: Hashable = None, cost: int | None = None) -> bool:
        """Keep ``value`` unless it alone costs more than ``max_entry``; evict LRU entries to fit. True when kept."""
        value_cost = approx_size(value) if cost is None else cost
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                total = ENTRY_OVERHEAD + key_size(key) + value_cost
                if total > self.max_entry:
                    self.oversize += 1
                    return False
                self._entries[key] = _Entry(total, {slot: value})
                self.nbytes += total
            elif slot not in entry.slots:  # another thread may have stored it meanwhile: keep the first
                added = 64 + value_cost  # the slot's dict item and key
                if entry.cost + added > self.max_entry:
                    self.oversize += 1
                    return False
                entry.slots[slot] = value
                entry.cost += added
                self.nbytes += added
                self._entries.move_to_end(key)
            else:
                self._entries.move_to_end(key)
            self._evict()
            return True

    def get(self, key: Hashable | None, compute: Callable[[], T], keep: Callable[[T], bool] | None = None) -> T:
        """The stored value for ``key``, else ``compute()`` (stored when it returns, unless ``keep(value)`` is false;
        ``key`` None: never stored).

        One computation per key at a time: threads that miss a key while it is being computed wait for it (256
        rollouts starting at once replay each task's gold once, not once each). When that computation raised, a
        waiter takes over; when ``keep`` refused its value, the waiters share it (the next miss computes again); when
        it was too large to keep, each waiter computes its own."""
        if key is None:
            return compute()
        found = self.lookup(key)
        if found is not MISS:
            return found  # type: ignore[no-any-return]
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            flight.done.wait()
            if flight.raised:
                return self.get(key, compute, keep)
            if flight.unkept is not MISS:
                return flight.unkept  # type: ignore[no-any-return]
            found = self.lookup(key)
            return compute() if found is MISS else found  # type: ignore[no-any-return]
        try:
            value = compute()
            if keep is None or keep(value):
                self.store(key, value)
            else:
                flight.unkept = value
        except BaseException:
            flight.raised = True
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()
        return value

    def configure(self, budget: int | None = None, maxsize: int | None = None) -> None:
        """Change the budget (bytes) and/or the entry limit, evicting at once what no longer fits."""
        with self._lock:
            if budget is not None:
                self.budget = budget
            if maxsize is not None:
                self.maxsize = maxsize
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def _evict(self) -> None:  # with the lock held
        while self._entries and (
            self.nbytes > self.budget or (self.maxsize is not None and len(self._entries) > self.maxsize)
        ):
            _, entry = self._entries.popitem(last=False)
            self.nbytes -= entry.cost
            self.evictions += 1

    def memoize(self, cost: Callable[[Any], int] | None = None) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Cache ``fn(key, *rest)`` under ``key`` (its first argument), in a slot named after ``fn`` and ``rest``.
        ``cost(value)``: what a value costs in bytes, no less than its deep size (default: the deep walk)."""
        return lambda fn: Memoized(self, fn, cost)


class Memoized(Generic[P, R]):
    """``fn`` cached in a :class:`ByteLRU`; ``cache_info()``/``cache_clear()`` as with ``functools.lru_cache``.

    ``cache_clear()`` empties the whole store (every function memoized in it) and resets this function's counters.
    """

    def __init__(self, store: ByteLRU, fn: Callable[P, R], cost: Callable[[Any], int] | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.store = store
        self._fn = fn
        self._cost = cost
        self._name = fn.__qualname__
        self._hits = self._misses = 0
        self._lock = threading.Lock()

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._cached(args, kwargs, lambda: self._fn(*args, **kwargs))

    def compute_with(self, compute: Callable[[], R], *args: Any) -> R:
        """``self(*args)``, a missing value computed by ``compute()``: for a caller that already holds what ``fn``
        would rebuild (a decoded answer). ``compute()`` must return what ``fn(*args)`` would."""
        return self._cached(args, {}, compute)

    def _cached(self, args: tuple[Any, ...], kwargs: dict[str, Any], compute: Callable[[], R]) -> R:
        key, rest = args[0], args[1:]
        slot = (self._name, *rest, *sorted(kwargs.items())) if rest or kwargs else self._name
        found = self.store.lookup(key, slot)
        if found is not MISS:
            with self._lock:
                self._hits += 1
            return found  # type: ignore[no-any-return]
        with self._lock:
            self._misses += 1
        value = compute()
        self.store.store(key, value, slot, cost=None if self._cost is None else self._cost(value))
        return value

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self.store), self.store.nbytes, self.store.budget)

    def cache_clear(self) -> None:
        self.store.clear()
        with self._lock:
            self._hits = self._misses = 0
