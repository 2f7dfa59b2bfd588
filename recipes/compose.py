"""Write every GRPO recipe's ``reward_funcs:`` and ``reward_weights:`` from its declared reward set.

The sets live in :mod:`rewardkit.rewards.sets`; ``CATALOG`` names the set of each ``rlhf`` recipe. ms-swift reads a
recipe with one ``yaml.safe_load`` of one file (``swift/cli/main.py``: no includes, no overlays, and it copies that
file into the output folder as the run's record), so each recipe stays a whole, self-contained file. Only the two
keys' lines and one comment line above ``reward_funcs:`` that names the set are generated; every other line,
comments included, is kept byte for byte::

    python -m rewardkit.recipes.compose           # --check: list the recipes that differ, exit 1 if any
    python -m rewardkit.recipes.compose --write   # rewrite them

A key keeps the style it has: a flow list (``[a, b]``) stays on its line with its trailing comment, a block list
(``- a`` lines) stays a block list with its indent.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

from rewardkit.recipes import CATALOG, ROOT, RecipeFile
from rewardkit.rewards.sets import SETS, RewardSet

KEYS = ("reward_funcs", "reward_weights")
WRITE_HINT = "run `python -m rewardkit.recipes.compose --write`"
# The comment line written right above reward_funcs, so a reader of the YAML knows where the values come from.
MARKER = "# Generated from reward set {name!r} (rewards/sets.py): python -m rewardkit.recipes.compose --write"
_MARKER_PREFIX = MARKER.split("{", 1)[0]

_KEY_LINE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?P<rest>.*)$")
_ITEM = re.compile(r"^(?P<indent>\s*)- ")


def rlhf_recipes() -> list[RecipeFile]:
    """Every catalogue entry ``swift rlhf`` reads, each of which names a reward set."""
    return [f for files in CATALOG.values() for f in files if f.command == "rlhf"]


def reward_set_of(recipe: RecipeFile) -> RewardSet:
    if recipe.reward_set not in SETS:
        raise KeyError(f"{recipe.name}: reward_set {recipe.reward_set!r} is not one of {sorted(SETS)}")
    return SETS[recipe.reward_set]


def _split_comment(rest: str) -> tuple[str, str]:
    """``' [a, b]   # note'`` -> ``(' [a, b]', '   # note')``: a ``#`` after whitespace, outside quotes."""
    quote = ""
    for i, char in enumerate(rest):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or rest[i - 1].isspace()):
            value = rest[:i].rstrip()
            return value, rest[len(value) :]
    return rest.rstrip(), ""


def _values(key: str, reward_set: RewardSet) -> list[str]:
    return list(reward_set.keys) if key == "reward_funcs" else reward_set.yaml_weights()


def _item(key: str, value: str) -> str:
    # Weights are quoted strings: ms-swift 4.4 hands YAML list items to its subprocess verbatim.
    return json.dumps(value) if key == "reward_weights" else value


def render(text: str, reward_set: RewardSet, name: str = "recipe") -> str:
    """``text`` with its ``reward_funcs:`` and ``reward_weights:`` values replaced by ``reward_set``'s.

    Raises ValueError when a key is missing or repeated, when its value has comment lines inside it, or when the
    result would read back as anything but the original with exactly those two values changed.
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        match = _KEY_LINE.match(lines[i].rstrip("\r\n"))
        if not match or match["key"] not in KEYS:
            out.append(lines[i])
            i += 1
            continue
        key = match["key"]
        if key in seen:
            raise ValueError(f"{name}: {key} appears twice")
        seen.add(key)
        newline = lines[i][len(lines[i].rstrip("\r\n")) :] or "\n"
        value, comment = _split_comment(match["rest"])
        # The value's continuation lines: indented lines and top-level "- item" lines (a block list).
        j = i + 1
        while j < len(lines) and lines[j].strip() and (lines[j][0].isspace() or _ITEM.match(lines[j])):
            if lines[j].lstrip().startswith("#"):
                raise ValueError(f"{name}: a comment inside {key}'s value would be lost; move it above the key")
            j += 1
        items = _values(key, reward_set)
        if key == "reward_funcs":
            if out and out[-1].startswith(_MARKER_PREFIX):
                out.pop()
            out.append(MARKER.format(name=reward_set.name) + newline)
        if value.strip():  # flow (or scalar) style: one line, trailing comment kept
            if j > i + 1:
                raise ValueError(f"{name}: {key} spans several lines; write it as one [..] line or a block list")
            flow = "[" + ", ".join(_item(key, v) for v in items) + "]"
            out.append(f"{key}: {flow}{comment}{newline}")
        else:  # block style, with the indent of its first item
            first = _ITEM.match(lines[i + 1]) if j > i + 1 else None
            indent = first["indent"] if first else "  "
            out.append(f"{key}:{comment}{newline}")
            out.extend(f"{indent}- {_item(key, v)}{newline}" for v in items)
        i = j
    missing = [k for k in KEYS if k not in seen]
    if missing:
        raise ValueError(f"{name}: no top-level {' or '.join(missing)} to write the reward set into")
    result = "".join(out)
    before, after = yaml.safe_load(text), yaml.safe_load(result)
    expected = {**before, "reward_funcs": _values("reward_funcs", reward_set)}
    expected["reward_weights"] = _values("reward_weights", reward_set)
    if after != expected or list(after) != list(before):
        raise ValueError(f"{name}: rewriting the reward lines changed more than those two keys; edit it by hand")
    return result


def stale(root: Path = ROOT) -> dict[str, str]:
    """``{recipe name: text it should have}`` for every rlhf recipe whose file differs from its reward set."""
    result = {}
    for recipe in rlhf_recipes():
        text = (root / recipe.name).read_text(encoding="utf-8")
        wanted = render(text, reward_set_of(recipe), recipe.name)
        if wanted != text:
            result[recipe.name] = wanted
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rewardkit.recipes.compose", description="Write the GRPO recipes' reward lines from their sets."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list the recipes that differ; exit 1 if any (default)")
    mode.add_argument("--write", action="store_true", help="rewrite the recipes that differ")
    parser.add_argument("--root", type=Path, default=ROOT, help="the recipes folder (default: the package's)")
    args = parser.parse_args(argv)
    differ = stale(args.root)
    for name, text in differ.items():
        if args.write:
            (args.root / name).write_text(text, encoding="utf-8")
            print(f"wrote {name}")
        else:
            print(f"{name}: reward_funcs/reward_weights differ from its reward set", file=sys.stderr)
    if differ and not args.write:
        print(WRITE_HINT, file=sys.stderr)
        return 1
    if not differ:
        print(f"all {len(rlhf_recipes())} GRPO recipes match their reward sets")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
