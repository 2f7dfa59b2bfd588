"""Which part of rewardkit may import which, read from the source with :mod:`ast` (nothing is imported).

The five top-level folders form one package (``pyproject.toml``'s package-dir): ``src/rewardkit``
is ``rewardkit``, ``rewards/`` is ``rewardkit.rewards``, and so on. Each module belongs to one
*area* (``AREAS``); ``ALLOWED`` says which other areas it may import, lowest layer first:

- ``plugins.envs`` (tool environments) and ``plugins.rollout.termination`` (why an episode ended)
  import no other area;
- ``rewards`` imports only those two;
- ``recipes`` imports ``rewards`` (the reward sets);
- ``data_builders`` imports ``rewards``, ``recipes`` and ``plugins.envs``;
- ``plugins.user_sim`` imports ``plugins.envs`` and ``rewards``; ``plugins.rollout``, then
  ``plugins.multi_turn``, then ``plugins.tau2_user`` each import those, ``plugins.rollout.termination``
  and the ones before them; no plugin imports ``data_builders``;
- ``rewardkit`` itself (the CLI, the pipelines, scoring, the summary) imports every area except the
  ms-swift entry points (``plugins.multi_turn``, ``plugins.tau2_user``), and nothing imports it.

Besides: an area imports another area's private modules (``_name``) never; ``swift`` is imported at
module level only by ``plugins.multi_turn`` and ``plugins.tau2_user`` (elsewhere inside functions);
imports are absolute and go through ``rewardkit.`` (never ``rewards.…`` or ``from . import``).
Each package ``__init__`` states its ``May import:`` list, checked against ``ALLOWED``.

``KNOWN`` lists the imports that break a rule today: each must be fixed, then removed from it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> package name (pyproject.toml's [tool.setuptools.package-dir])
FOLDERS = {
    "src/rewardkit": "rewardkit",
    "rewards": "rewardkit.rewards",
    "plugins": "rewardkit.plugins",
    "data_builders": "rewardkit.data_builders",
    "recipes": "rewardkit.recipes",
}
ENVS = "rewardkit.plugins.envs"
TERMINATION = "rewardkit.plugins.rollout.termination"
ROLLOUT = "rewardkit.plugins.rollout"
USER_SIM = "rewardkit.plugins.user_sim"
MULTI_TURN = "rewardkit.plugins.multi_turn"
TAU2_USER = "rewardkit.plugins.tau2_user"
REWARDS = "rewardkit.rewards"
RECIPES = "rewardkit.recipes"
BUILDERS = "rewardkit.data_builders"
PLUGINS = "rewardkit.plugins"
CORE = "rewardkit"  # src/rewardkit: cli, cli_*, pipelines, scoring, summary, safe_io, tiny_model

# area -> the other areas its modules may import
ALLOWED: dict[str, frozenset[str]] = {
    ENVS: frozenset(),
    TERMINATION: frozenset(),
    REWARDS: frozenset({ENVS, TERMINATION}),
    RECIPES: frozenset({REWARDS}),
    BUILDERS: frozenset({REWARDS, RECIPES, ENVS}),
    USER_SIM: frozenset({REWARDS, ENVS}),
    ROLLOUT: frozenset({REWARDS, ENVS, TERMINATION, USER_SIM}),
    MULTI_TURN: frozenset({REWARDS, ENVS, TERMINATION, USER_SIM, ROLLOUT}),
    TAU2_USER: frozenset({REWARDS, ENVS, TERMINATION, USER_SIM, ROLLOUT, MULTI_TURN}),
    PLUGINS: frozenset(),  # plugins/__init__.py: a docstring only
    CORE: frozenset({REWARDS, RECIPES, BUILDERS, ENVS, TERMINATION, USER_SIM, ROLLOUT}),
}
AREAS = sorted(ALLOWED, key=len, reverse=True)  # the longest prefix wins: termination before rollout
SWIFT_AT_TOP = frozenset({MULTI_TURN, TAU2_USER})  # the ms-swift entry points (plugins/tau2_user.py loads them)
PENDING_INIT_DOCS: frozenset[str] = frozenset()  # packages whose __init__ does not state "May import:" yet

# Imports that break a rule today, as (importing module, imported module). Fix, then delete the line.
KNOWN: frozenset[tuple[str, str]] = frozenset()  # every rule holds today


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (or, for ``from m import name``, m.name when that is a module)
    line: int
    top: bool  # runs when the module is imported (not inside a function, nor under TYPE_CHECKING)
    relative: bool
    private_name: bool  # ``from m import _name``

    def __str__(self) -> str:
        return f"{self.module} (line {self.line}) imports {self.target}"


def module_name(path: Path) -> str:
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        if path.is_relative_to(base):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise AssertionError(path)


def _sources() -> dict[str, Path]:
    found = {module_name(p): p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}
    return dict(sorted(found.items()))


SOURCES = _sources()


def area(module: str) -> str | None:
    return next((a for a in AREAS if module == a or module.startswith(a + ".")), None)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def _walk(node: ast.AST, top: bool):
    for child in ast.iter_child_nodes(node):
        runs_now = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(child, ast.If) and _is_type_checking(child):
            yield from ((n, False) for n in child.body)
            yield from ((n, runs_now) for n in child.orelse)
            for n in child.body:
                yield from _walk(n, False)
            for n in child.orelse:
                yield from _walk(n, runs_now)
            continue
        yield child, runs_now
        yield from _walk(child, runs_now)


def imports_of(module: str) -> list[Import]:
    path = SOURCES[module]
    out = []
    for node, top in _walk(ast.parse(path.read_text(encoding="utf-8")), True):
        if isinstance(node, ast.Import):
            out += [Import(module, a.name, node.lineno, top, False, False) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # resolved, to check its direction too; reported as relative anyway
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in SOURCES else base
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                out.append(Import(module, target, node.lineno, top, bool(node.level), private and target == base))
    return out


IMPORTS = [imp for module in SOURCES for imp in imports_of(module)]
OWN = [imp for imp in IMPORTS if imp.target == CORE or imp.target.startswith(CORE + ".")]


def _private(imp: Import) -> bool:
    parts = imp.target.split(".")
    return imp.private_name or any(p.startswith("_") and not p.startswith("__") for p in parts)


def direction_violations() -> set[tuple[str, str]]:
    return {
        (imp.module, imp.target)
        for imp in OWN
        if area(imp.target) != area(imp.module) and area(imp.target) not in ALLOWED[area(imp.module)]
    }


def private_violations() -> set[tuple[str, str]]:
    return {(imp.module, imp.target) for imp in OWN if _private(imp) and area(imp.target) != area(imp.module)}


def test_every_module_is_read() -> None:
    assert len(SOURCES) > 50
    for module in ("rewardkit.cli", "rewardkit.rewards._base", TERMINATION, TAU2_USER, "rewardkit.recipes"):
        assert module in SOURCES
    assert all(area(m) in ALLOWED for m in SOURCES)
    assert {area(m) for m in SOURCES} == set(ALLOWED), "an area without modules: update AREAS"
    assert len(OWN) > 100 and any(not imp.top for imp in OWN)


def test_allowed_directions_have_no_cycle() -> None:
    done: set[str] = set()
    remaining = dict(ALLOWED)
    while remaining:
        ready = [a for a, needs in remaining.items() if needs <= done]
        assert ready, f"cycle among {sorted(remaining)}"
        done |= set(ready)
        for a in ready:
            del remaining[a]


def test_nothing_imports_the_cli_layer() -> None:
    assert all(CORE not in allowed for allowed in ALLOWED.values())


def test_imports_follow_the_allowed_directions() -> None:
    new = sorted(direction_violations() - KNOWN)
    explain = [
        f"{m} ({area(m)}) imports {t} ({area(t)}); {area(m)} may import {sorted(ALLOWED[area(m)])}" for m, t in new
    ]
    assert not new, "\n".join(explain)


def test_private_modules_stay_in_their_area() -> None:
    new = sorted(private_violations() - KNOWN)
    assert not new, "\n".join(f"{m} imports {t}: make what it needs public in {area(t)}" for m, t in new)


def test_known_violations_are_still_there() -> None:
    # A fixed import must leave KNOWN, so that it cannot come back unnoticed.
    fixed = sorted(KNOWN - direction_violations() - private_violations())
    assert not fixed, f"fixed, delete from KNOWN: {fixed}"


def test_swift_is_imported_at_module_level_only_by_the_entry_points() -> None:
    top = [imp for imp in IMPORTS if imp.top and (imp.target == "swift" or imp.target.startswith("swift."))]
    assert top, "the entry points import swift at module level: is the scan still working?"
    wrong = [str(imp) for imp in top if area(imp.module) not in SWIFT_AT_TOP]
    assert not wrong, "import swift inside the function that needs it:\n" + "\n".join(wrong)


def test_imports_are_absolute_through_rewardkit() -> None:
    relative = [str(imp) for imp in IMPORTS if imp.relative]
    bare = [
        str(imp) for imp in IMPORTS if imp.target.split(".")[0] in {"rewards", "plugins", "data_builders", "recipes"}
    ]
    # ms-swift loads rewards/ and plugins/ files under names of its own: a relative import would break there.
    assert not relative and not bare, "\n".join(relative + bare)


@pytest.mark.parametrize("package", ["rewardkit.plugins", "rewardkit.plugins.rollout", "rewardkit.plugins.multi_turn"])
def test_light_package_inits_import_nothing(package: str) -> None:
    # rewards import rewardkit.plugins.rollout.termination, which runs these two __init__ files first; and
    # importing rewardkit.plugins.multi_turn must not run ms-swift before a module of it is asked for.
    assert [imp for imp in IMPORTS if imp.module == package and imp.target != "__future__"] == []


def stated_imports(package: str) -> set[str] | None:
    """The areas named in the ``May import:`` sentence of the package's ``__init__`` docstring."""
    doc = ast.get_docstring(ast.parse(SOURCES[package].read_text(encoding="utf-8"))) or ""
    found = re.search(r"May import:(.*?)(?:\.(?=\s|$)|\n\s*\n|$)", doc, re.DOTALL)  # to the sentence's end
    if found is None:
        return None
    return {area(name) for name in re.findall(r"rewardkit(?:\.\w+)*", found.group(1))} - {None}


@pytest.mark.parametrize("package", sorted(a for a in ALLOWED if SOURCES[a].name == "__init__.py"))
def test_package_docstring_states_what_it_may_import(package: str) -> None:
    stated = stated_imports(package)
    if stated is None:
        assert package in PENDING_INIT_DOCS, f"{package}'s __init__ docstring needs a 'May import:' paragraph"
        return
    assert stated == set(ALLOWED[package]), f"{package}'s docstring says {sorted(stated)}; ALLOWED disagrees"


CLI_MODULES = sorted(m for m in SOURCES if m.startswith("rewardkit.cli_"))


def test_cli_modules_are_found() -> None:
    assert {"rewardkit.cli_build", "rewardkit.cli_env", "rewardkit.cli_recipe"} <= set(CLI_MODULES)


@pytest.mark.parametrize("module", CLI_MODULES)
def test_cli_modules_share_one_naming_pattern(module: str) -> None:
    """``add_parsers(sub)`` adds the module's subcommands; a handler is ``cmd_<command>[_<action>]``."""
    tree = ast.parse(SOURCES[module].read_text(encoding="utf-8"))
    public = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert "add_parsers" in public
    assert all(name == "add_parsers" or name.startswith("cmd_") for name in public), public
    handlers = [
        kw.value.id
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "set_defaults"
        for kw in call.keywords
        if kw.arg == "func" and isinstance(kw.value, ast.Name)
    ]
    assert handlers and all(h.startswith("cmd_") and h in public for h in handlers), handlers
    command = module.removeprefix("rewardkit.cli_")
    assert all(h == f"cmd_{command}" or h.startswith(f"cmd_{command}_") for h in handlers), (command, handlers)
