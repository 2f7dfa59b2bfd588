"""Arbitrary mutations of a valid ``domain.json``: each spec loads and ``env check`` runs to a report, or it is
refused with one :class:`DomainDataError` line naming a file of the spec, and nothing is written anywhere.

The spec is tests/test_spec_errors.py's small one; a mutation drops a key, puts arbitrary JSON at any path
(integers past 2**63, strings with a lone surrogate, file names that leave the folder, lists, objects, null,
floats), adds a key, or repeats a tool. Each example gets a folder of its own and an empty domain registry, since a
process loads each path, and registers each name, once.
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_spec_errors import SPEC, write_spec

from rewardkit.envs import registry
from rewardkit.envs.domain import DomainDataError
from rewardkit.envs.spec_domain import load_spec
from rewardkit.runs.domains.domain_check import check_domain


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``value``: the keys and indexes leading to each of its parts, the whole first."""
    yield at
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, (*at, key))


PATHS = list(_paths(SPEC))
SHALLOW = [p for p in PATHS if len(p) <= 4]  # the keys, each tool's fields and each part of its rule: half the draws
WHERE = st.sampled_from(SHALLOW) | st.sampled_from(PATHS)
FILE_NAMES = ["../outside.json", "/etc/hostname", "policy.md", "seed.json", "tasks.json", "schema.sql", ".", "", "x"]
TEXT = st.text(max_size=12) | st.sampled_from(FILE_NAMES) | st.text(max_size=4).map(lambda s: s + "\ud800")
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)
MUTATION = st.one_of(
    st.tuples(st.just("drop"), WHERE.filter(bool)),
    st.tuples(st.just("set"), WHERE, JSON),
    st.tuples(st.just("add"), WHERE, TEXT, JSON),
    st.tuples(st.just("repeat_tool"), st.integers(0, len(SPEC["tools"]) - 1)),
)


def mutate(spec: Any, mutation: tuple[Any, ...]) -> Any:
    """``spec`` with one mutation applied (a path a previous mutation removed leaves it as it is)."""
    kind, path, *values = mutation
    if kind == "repeat_tool":
        tools = spec.get("tools") if isinstance(spec, dict) else None
        if isinstance(tools, list) and path < len(tools):
            tools.append(copy.deepcopy(tools[path]))
        return spec
    if kind == "set" and not path:
        return values[0]
    parent = spec
    for key in path[:-1] if kind != "add" else path:
        try:
            parent = parent[key]
        except (KeyError, IndexError, TypeError):
            return spec
    if kind == "add":
        if isinstance(parent, dict):
            parent[values[0]] = values[1]
    elif isinstance(parent, dict | list) and _has(parent, path[-1]):
        if kind == "drop":
            del parent[path[-1]]
        else:
            parent[path[-1]] = values[0]
    return spec


def _has(parent: dict[Any, Any] | list[Any], key: Any) -> bool:
    return key in parent if isinstance(parent, dict) else isinstance(key, int) and key < len(parent)


def tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` and its size."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@contextlib.contextmanager
def empty_registry() -> Iterator[None]:
    """No domain loaded or registered yet, and the registry as it was afterwards."""
    saved = dict(registry._REGISTERED), dict(registry._BY_REF)
    registry._REGISTERED.clear()
    registry._BY_REF.clear()
    try:
        yield
    finally:
        for live, kept in zip((registry._REGISTERED, registry._BY_REF), saved, strict=True):
            live.clear()
            live.update(kept)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_a_mutated_spec_loads_and_checks_or_is_refused_in_one_line(tmp_path: Path, mutations: list[Any]) -> None:
    folder = (Path(tempfile.mkdtemp(dir=tmp_path)) / "spec").resolve()
    spec = copy.deepcopy(SPEC)
    for mutation in mutations:
        spec = mutate(spec, mutation)
    write_spec(folder, spec)
    (tmp_path / "outside.json").write_text(json.dumps([]), encoding="utf-8")
    before = tree(tmp_path)
    with empty_registry():
        try:
            load_spec(folder)
            report = check_domain(str(folder))
        except DomainDataError as exc:
            message = str(exc)
            assert "\n" not in message and "\r" not in message, message
            assert message.startswith(str(folder) + "/"), message  # domain.json, or the file of the spec at fault
        else:
            assert report.checks and json.dumps(report.as_dict())
    assert tree(tmp_path) == before  # nothing written, in the folder or outside it
