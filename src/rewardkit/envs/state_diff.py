"""Where two final states of a domain differ, field by field: what the agent left against what the gold left.

A state's changes are read unit by unit (a row, or an entity of a collection), kind -> key -> (its value before,
its value now), None where there is none (:meth:`~rewardkit.envs.harness.StatefulEnvironment.changes`). The SQLite
tables track their writes and name only the units they touched, so two episodes on a database of thousands of rows
compare in the few units either changed; any other environment's state is read whole from its export
(:func:`units`: its collections keyed as the export keys them, a list's rows by position).

>>> fresh = {"city": "Paris", "zip": "75001"}
>>> agent = {"users": {"u1": (fresh, {"city": "Lyon", "zip": "75001"})}}
>>> gold = {"users": {"u1": (fresh, {"city": "Lyon", "zip": "69001"})}, "orders": {"o9": (None, {"status": "new"})}}
>>> [(d["table"], d["row"], d["field"], d.get("agent", "(missing)"), d["gold"]) for d in state_diff(agent, gold)]
[('orders', 'o9', 'status', '(missing)', 'new'), ('users', 'u1', 'zip', '75001', '69001')]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardkit.envs.tool import canonical

Changes = Mapping[str, Mapping[str, tuple[Any, Any]]]  # kind -> key -> (before, now); None: no such unit


def units(export: Any) -> dict[str, dict[str, tuple[Any, Any]]]:
    """A whole export as changes: every unit of every collection (or table), its before unknown (None)."""
    return {
        kind: {key: (None, value) for key, value in _items(found).items()} for kind, found in _items(export).items()
    }


def state_diff(agent: Changes, gold: Changes) -> list[dict[str, Any]]:
    """One entry per field that differs as the state hash sees it (``1`` is not ``true``; ``1.0`` is ``1``):
    ``table``, ``row``, ``field``, and ``agent`` and ``gold``, each absent where that side has no such field, so a
    missing value and a real null stay apart. In path order; a unit only one side changed is, on the other side, as
    it was before."""
    out = []
    for kind in sorted(set(agent) | set(gold)):
        mine, theirs = agent.get(kind, {}), gold.get(kind, {})
        for key in sorted(set(mine) | set(theirs)):
            a = mine[key][1] if key in mine else theirs[key][0]
            g = theirs[key][1] if key in theirs else mine[key][0]
            if canonical(a) == canonical(g):
                continue
            left, right, before = _leaves(a), _leaves(g), len(out)
            for path in sorted(set(left) | set(right)):
                if path in left and path in right and canonical(left[path]) == canonical(right[path]):
                    continue
                entry = {"table": kind, "row": key, "field": ".".join(path)}
                entry.update({"agent": left[path]} if path in left else {})
                entry.update({"gold": right[path]} if path in right else {})
                out.append(entry)
            if len(out) == before:  # no scalar differs: an empty object against none
                out.append({"table": kind, "row": key, "field": "", **_sides(a, g)})
    return out


def _sides(a: Any, g: Any) -> dict[str, Any]:
    return {**({} if a is None else {"agent": a}), **({} if g is None else {"gold": g})}


def _leaves(unit: Any) -> dict[tuple[str, ...], Any]:
    """Every scalar of a unit by its path; a unit that does not exist has none, an empty object or list neither."""
    return {} if unit is None else leaves(unit)


def leaves(value: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every scalar of a JSON value by its path (keys and list indices as text)."""
    if not isinstance(value, Mapping | list):
        return {path: value}
    out: dict[tuple[str, ...], Any] = {}
    for key, item in _items(value).items():
        out.update(leaves(item, (*path, key)))
    return out


def _items(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return {str(i): v for i, v in enumerate(value)} if isinstance(value, list) else {}
