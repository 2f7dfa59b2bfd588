"""rewardkit's layers, lowest first: the one declaration of which package may import which.

A module may import modules of its own package and of any package in a lower layer, never one in its
own layer (peers) or above. The entry points are loaded from outside (ms-swift, the console script)
and nothing imports them. ``tests/test_layout.py`` reads every module's imports with :mod:`ast`
(imports inside functions included, ``TYPE_CHECKING`` blocks excluded) and fails on an upward or
sideways import and on any import circle between modules; ``docs/architecture.md`` carries the table
that :func:`render_table` writes from this declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

from rewardkit.markdown import table


@dataclass(frozen=True)
class Package:
    name: str  # the import name
    folder: str  # where its files are, from the repository root
    holds: str  # one line: what is in it


# Each inner tuple is one layer; its packages are peers and do not import each other.
LAYERS: tuple[tuple[Package, ...], ...] = (
    (
        Package("rewardkit.errors", "src/rewardkit/errors.py", "`UserError`: the base of every error in your input"),
        Package("rewardkit.markdown", "src/rewardkit/markdown.py", "`table`: every Markdown table a report writes"),
    ),
    (
        Package("rewardkit", "src/rewardkit/__init__.py", "the version, the public errors, and this declaration"),
        Package(
            "rewardkit.files",
            "src/rewardkit/files",
            "JSONL reading, outputs that are never half-written, and the byte-bounded caches",
        ),
        Package(
            "rewardkit.config",
            "src/rewardkit/config",
            "declaring config sections, loading `$REWARDKIT_CONFIG`, the generated reference",
        ),
    ),
    (
        Package(
            "rewardkit.envs",
            "src/rewardkit/envs",
            "tool environments and the task format: harness, domains, SQLite tables (tau2 retail on them), MCP both "
            "ways, tool-call parsing, tasks, gold outcomes, how an episode may end",
        ),
    ),
    (Package("rewardkit.rewards", "rewards", "one reward per file, for ms-swift's `orms` (and TRL)"),),
    (
        Package("rewardkit.recipes", "recipes", "native ms-swift YAML, their catalogue and generated reward lines"),
        Package(
            "rewardkit.testing",
            "src/rewardkit/testing",
            "the reward contract as a library: checks, hostile inputs, gaming probes; the pytest plugin",
        ),
    ),
    (Package("rewardkit.data_builders", "data_builders", "raw data -> ms-swift JSONL, every reject counted"),),
    (
        Package(
            "rewardkit.loop",
            "src/rewardkit/loop",
            "the conversation loop: episode, agents (gold, HTTP, checkpoint), user simulators, the HTTP client",
        ),
    ),
    (
        Package(
            "rewardkit.plugins",
            "plugins",
            "what ms-swift loads besides rewards: the multi-turn scheduler, its token ids, the advantage exclusion",
        ),
        Package(
            "rewardkit.serve",
            "src/rewardkit/serve",
            "a domain served to any trainer, whole episodes at a time: the OpenEnv server",
        ),
        Package(
            "rewardkit.runs",
            "src/rewardkit/runs",
            "runs of the loop and the rewards, a folder per family: episodes (synth, eval), stats, training (audit), "
            "viewer, tasks, domains",
        ),
    ),
    (
        Package(
            "rewardkit.pipelines",
            "src/rewardkit/pipelines",
            "`recipe run`: one stage skeleton, the planning and agent chains, the tiny model, reports",
        ),
        Package(
            "rewardkit.lint",
            "src/rewardkit/lint",
            "`rewardkit lint`: a reward on your rows, a recipe's reward set on your dataset, where the loss falls",
        ),
    ),
    (Package("rewardkit.cli", "src/rewardkit/cli", "the `rewardkit` command: flags -> calls, one line per error"),),
)

# Loaded from outside: ms-swift's --external_plugins, and the `rewardkit` console script.
ENTRY_POINTS = frozenset({"rewardkit.plugins", "rewardkit.cli"})
# The only packages that import ms-swift at module level (everywhere else, inside the function that needs it).
SWIFT_AT_MODULE_LEVEL = frozenset({"rewardkit.plugins"})


def packages() -> dict[str, int]:
    """Package name -> its layer's index (0 = lowest)."""
    return {p.name: level for level, layer in enumerate(LAYERS) for p in layer}


def render_table() -> str:
    """The Markdown table of ``docs/architecture.md``: one row per package, lowest layer first."""
    rows = [
        (level, f"`{p.name}`" + (" (entry point)" if p.name in ENTRY_POINTS else ""), f"`{p.folder}`", p.holds)
        for level, layer in enumerate(LAYERS)
        for p in layer
    ]
    return "\n".join(table(["layer", "package", "folder", "holds"], rows)) + "\n"
