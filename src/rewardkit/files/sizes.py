"""What a cached value costs in bytes: a deep ``sys.getsizeof`` (:mod:`rewardkit.files.cache` counts its entries so)."""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

_LEAVES = (str, bytes, bytearray, int, float, complex, bool, type(None))
_LEAF_TYPES = frozenset(_LEAVES)


def approx_size(obj: Any) -> int:
    """Deep ``sys.getsizeof`` of ``obj``: containers, mappings and dataclass instances are walked, each object once.

    Iterative, so a deeply nested JSON value costs no recursion. A leaf (a string, a number) is counted where its
    container is read, never pushed: a decoded JSON answer is mostly leaves.
    """
    getsizeof = sys.getsizeof
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += getsizeof(o)
        kind = type(o)
        if kind is dict:
            children: Iterable[Any] = itertools.chain(o, o.values())
        elif kind is list or kind is tuple:
            children = o
        elif isinstance(o, _LEAVES):
            continue
        elif isinstance(o, (list, tuple, set, frozenset)):
            children = o
        elif isinstance(o, Mapping):
            children = itertools.chain(o.keys(), o.values())
        elif dataclasses.is_dataclass(o) and not isinstance(o, type):
            attrs = getattr(o, "__dict__", None)
            if attrs is not None:
                total += getsizeof(attrs)
                children = attrs.values()
            else:
                children = [getattr(o, f.name) for f in dataclasses.fields(o)]
        else:
            continue
        for child in children:
            if type(child) not in _LEAF_TYPES:
                stack.append(child)
            elif id(child) not in seen:
                seen.add(id(child))
                total += getsizeof(child)
    return total


def key_size(key: Hashable) -> int:
    """What a key costs the cache: its strings (a tuple key's string parts too); other parts are shared objects."""
    if isinstance(key, tuple):
        return sys.getsizeof(key) + sum(sys.getsizeof(k) for k in key if isinstance(k, (str, bytes)))
    return sys.getsizeof(key)


# What CPython's ``json.loads`` can make of one character of text, at most. Each object is made from characters of
# its own (a container's brackets and separators, a string's quotes and characters, a number's digits), and the
# costliest shape per character is a container holding one container: a one-item list is 88 bytes for its two
# brackets, a one-key dict (184 bytes) with its key (a new string of one astral character, 80 bytes) 264 bytes for
# six characters: 44 bytes a character. tests/test_sizes.py checks such shapes against the deep walk.
JSON_BYTES_PER_CHAR = 48
JSON_BASE_BYTES = 64  # "{}": an empty dict alone


def decoded_json_size(text: str) -> int:
    """An upper bound on ``approx_size(json.loads(text))`` that costs nothing to compute: the cache counts a decoded
    answer by it instead of walking the value (the walk cost more than the decoding)."""
    return JSON_BYTES_PER_CHAR * len(text) + JSON_BASE_BYTES
