"""Which module may import which, read from the source with :mod:`ast` (nothing is imported).

The layer order is declared once, in :mod:`rewardkit.layers`. Every import statement of every module counts, imports
inside functions included. ``if TYPE_CHECKING:`` blocks never run, so the layer order leaves them out, but a circle
through one is still a circle: the modules still need each other to be read. The checks are plain functions of an
import list, so the tests at the end feed them a made-up upward import and a made-up circle and watch them fail.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from package_files import ROOT, SOURCES

import rewardkit.rewards as rewards_package
from rewardkit.envs.registry import BUILTIN
from rewardkit.layers import ENTRY_POINTS, LAYERS, SWIFT_AT_MODULE_LEVEL, packages, render_table
from rewardkit.rewards._found import class_name, key_of, reward_modules
from rewardkit.rewards.registry import reward_class

LEVEL = packages()
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TABLE_BEGIN = "<!-- rewardkit:layers:begin (generated from src/rewardkit/layers.py) -->"
TABLE_END = "<!-- rewardkit:layers:end -->"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (for ``from m import name``: m.name when that is a module)
    line: int
    top: bool  # runs when the module is imported (not inside a function)
    relative: bool
    private_name: bool  # ``from m import _name``
    type_only: bool = False  # inside ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        return f"{self.module} (line {self.line}) imports {self.target}"


def package_of(module: str) -> str:
    """The declared package that holds ``module`` (the longest matching name)."""
    found = [p for p in LEVEL if module == p or module.startswith(p + ".")]
    assert found, f"{module} is in no package of rewardkit.layers.LAYERS"
    return max(found, key=len)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def _walk(node: ast.AST, top: bool, type_only: bool = False):
    for child in ast.iter_child_nodes(node):
        if _is_type_checking(child):  # its body never runs; an else branch does
            for branch, typed in ((child.body, True), (child.orelse, type_only)):  # type: ignore[attr-defined]
                for n in branch:
                    yield n, top, typed
                    yield from _walk(n, top, typed)
            continue
        runs_now = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield child, runs_now, type_only
        yield from _walk(child, runs_now, type_only)


def imports_of(module: str, source: str, known: Iterable[str]) -> list[Import]:
    known = set(known)
    is_package = SOURCES.get(module, Path("x.py")).name == "__init__.py"
    out = []
    for node, top, type_only in _walk(ast.parse(source), True):
        if isinstance(node, ast.Import):
            out += [Import(module, a.name, node.lineno, top, False, False, type_only) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # resolved, to check its direction too; reported as relative anyway
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in known else base
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                private_name = private and target == base
                out.append(Import(module, target, node.lineno, top, bool(node.level), private_name, type_only))
    return out


# The two registries import modules by name (importlib, when first asked for one): the rewards' every reward module,
# the domains' every built-in domain. Edges like any import's, so that importing a registry back is a circle here too.
REGISTRY = "rewardkit.rewards.registry"
BY_NAME = {
    REGISTRY: sorted(reward_modules().values()),
    "rewardkit.envs.registry": sorted({ref.split(":")[0] for ref in BUILTIN.values()}),
}
LOADED = [
    Import(importer, module, 0, False, False, False) for importer, targets in BY_NAME.items() for module in targets
]
EVERY_IMPORT = [
    *(imp for m, p in SOURCES.items() for imp in imports_of(m, p.read_text(encoding="utf-8"), SOURCES)),
    *LOADED,
]
IMPORTS = [imp for imp in EVERY_IMPORT if not imp.type_only]  # the ones that run


def own(imports: Iterable[Import]) -> list[Import]:
    return [imp for imp in imports if imp.target == "rewardkit" or imp.target.startswith("rewardkit.")]


def layer_violations(imports: Iterable[Import]) -> list[str]:
    """Imports that go up the layer order, sideways to a peer, or into an entry point."""
    wrong = []
    for imp in own(imports):
        mine, theirs = package_of(imp.module), package_of(imp.target)
        if mine == theirs:
            continue
        if theirs in ENTRY_POINTS:
            wrong.append(f"{imp}: nothing imports the entry point {theirs}")
        elif LEVEL[theirs] >= LEVEL[mine]:
            where = "the same layer as" if LEVEL[theirs] == LEVEL[mine] else "a layer above"
            wrong.append(f"{imp}: {theirs} (layer {LEVEL[theirs]}) is {where} {mine} (layer {LEVEL[mine]})")
    return wrong


def private_violations(imports: Iterable[Import]) -> list[str]:
    def private(imp: Import) -> bool:
        parts = imp.target.split(".")
        return imp.private_name or any(p.startswith("_") and not p.startswith("__") for p in parts)

    return [
        f"{imp}: make what it needs public in {package_of(imp.target)}"
        for imp in own(imports)
        if private(imp) and package_of(imp.target) != package_of(imp.module)
    ]


def circles(imports: Iterable[Import]) -> list[list[str]]:
    """Every strongly connected group of modules (Tarjan), and every module that imports itself."""
    graph: dict[str, set[str]] = {}
    for imp in own(imports):
        graph.setdefault(imp.module, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_read_and_placed() -> None:
    assert len(SOURCES) > 80
    for module in ("rewardkit.cli", "rewardkit.rewards.strict_format", "rewardkit.plugins.simulated_user"):
        assert module in SOURCES
    assert {package_of(m) for m in SOURCES} == set(LEVEL), "a declared package without modules, or the reverse"
    assert len(own(IMPORTS)) > 200 and any(not imp.top for imp in own(IMPORTS))


def test_no_import_goes_up_or_sideways() -> None:
    wrong = layer_violations(IMPORTS)
    assert not wrong, "\n".join(wrong)


def test_no_import_circle_not_even_a_type_only_one() -> None:
    found = circles(EVERY_IMPORT)
    assert not found, "\n".join(" <-> ".join(group) for group in found)


def test_only_the_registry_imports_by_name() -> None:
    # Any other importlib call on rewardkit would be an import this file cannot see.
    users = [m for m, p in SOURCES.items() if "import_module(" in p.read_text(encoding="utf-8")]
    assert sorted(users) == sorted(BY_NAME), users
    assert {imp.target for imp in LOADED} >= {"rewardkit.rewards.think_length", "rewardkit.envs.retail.domain"}


def hand_lists(source: str, keys: set[str]) -> list[tuple[int, list[str]]]:
    """Literal collections (list, tuple, set, dict keys) that name two rewards or more, by key or by class."""
    names = keys | {class_name(k) for k in keys}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            named = set()
            for item in items:
                item = item.func if isinstance(item, ast.Call) else item
                value = item.value if isinstance(item, ast.Constant) else getattr(item, "id", None)
                if value in names:
                    named.add(value)
            if len(named) > 1:
                found.append((node.lineno, sorted(named)))
    return found


# The package, and the tests that once kept the set of rewards by hand. The rewards' own package names each one it
# exports (its type-only imports and ``__all__``, which an editor reads); that list is checked against the folder.
EXPORTS = ROOT / "rewards" / "__init__.py"
LISTING_FREE = [
    *(path for path in SOURCES.values() if path != EXPORTS),
    ROOT / "tests" / "conftest.py",
    ROOT / "tests" / "test_reward_contract.py",
]


def test_the_rewards_package_exports_every_reward_of_its_folder() -> None:
    folder = {class_name(key) for key, module in reward_modules().items() if module.startswith("rewardkit.rewards.")}
    exported = {name for name in rewards_package.__all__ if name in folder or key_of(name) in reward_modules()}
    assert exported == folder, f"rewards/__init__.py: import and list in __all__ {sorted(folder - exported)}"
    assert all(getattr(rewards_package, name) is reward_class(key_of(name)) for name in folder)


def test_no_reward_is_listed_by_hand_outside_its_own_file() -> None:
    keys = set(reward_modules())
    wrong = [
        f"{path.relative_to(ROOT)}:{line} lists {named}: read them from rewardkit.rewards.REWARDS (or a set)"
        for path in LISTING_FREE
        for line, named in hand_lists(path.read_text(encoding="utf-8"), keys)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_listing_check_finds_a_listing() -> None:
    keys = {"think_length", "json_valid"}
    assert hand_lists('X = {"think_length": ThinkLength, "json_valid": JsonValid}\n', keys) == [
        (1, ["json_valid", "think_length"])  # a dict's keys
    ]
    assert hand_lists("__all__ = ['JsonValid', 'ThinkLength']\nY = [JsonValid()]\n", keys) == [
        (1, ["JsonValid", "ThinkLength"])
    ]


def test_private_modules_stay_in_their_package() -> None:
    wrong = private_violations(IMPORTS)
    assert not wrong, "\n".join(wrong)


def test_swift_is_imported_at_module_level_only_by_the_plugins() -> None:
    top = [imp for imp in IMPORTS if imp.top and (imp.target == "swift" or imp.target.startswith("swift."))]
    assert top, "the plugins import swift at module level: is the scan still working?"
    wrong = [str(imp) for imp in top if package_of(imp.module) not in SWIFT_AT_MODULE_LEVEL]
    assert not wrong, "import swift inside the function that needs it:\n" + "\n".join(wrong)


def test_imports_are_absolute_through_rewardkit() -> None:
    relative = [str(imp) for imp in IMPORTS if imp.relative]
    bare = [
        str(imp) for imp in IMPORTS if imp.target.split(".")[0] in {"rewards", "plugins", "data_builders", "recipes"}
    ]
    # ms-swift loads rewards/ and plugins/ files under names of its own: a relative import would break there.
    assert not relative and not bare, "\n".join(relative + bare)


def test_plugins_init_imports_nothing() -> None:
    # ms-swift loads plugins/simulated_user.py, whose imports run this file first: no ms-swift, no loop here.
    assert [imp for imp in IMPORTS if imp.module == "rewardkit.plugins" and imp.target != "__future__"] == []


def test_the_architecture_page_carries_the_declared_table() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert TABLE_BEGIN in text and TABLE_END in text, f"{ARCHITECTURE} lost its layer-table markers"
    current = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    assert current.strip() == render_table().strip(), f"regenerate the table in {ARCHITECTURE}"
    for layer in LAYERS:
        for p in layer:
            assert (ROOT / p.folder).exists(), p


# The checks themselves, on made-up modules: each must catch what it is for.
FAKE = {
    "rewardkit.envs.a": "import rewardkit.rewards.b\n",  # envs (layer 1) -> rewards (layer 2): upward
    "rewardkit.rewards.b": "def f():\n    from rewardkit.envs import a\n",  # lazy, but still an edge
    "rewardkit.runs.c": "from rewardkit.plugins import d\n",  # into an entry point (and a peer)
    "rewardkit.loop.e": "from rewardkit.envs.a import _hidden\nfrom typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n    import rewardkit.cli\n",
}


def _fake_imports(sources: Mapping[str, str], type_only: bool = False) -> list[Import]:
    found = [imp for m, s in sources.items() for imp in imports_of(m, s, sources)]
    return found if type_only else [imp for imp in found if not imp.type_only]


def test_a_type_only_import_still_closes_a_circle() -> None:
    # f needs g only for a type hint, g imports f: the layer order never sees the hint, the circle check does
    typed = {
        "rewardkit.envs.f": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rewardkit.envs.g import G\n",
        "rewardkit.envs.g": "import rewardkit.envs.f\n",
    }
    assert circles(_fake_imports(typed, type_only=True)) == [["rewardkit.envs.f", "rewardkit.envs.g"]]
    assert circles(_fake_imports(typed)) == []


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (layer_violations, [r"rewardkit.envs.a .* a layer above", r"rewardkit.runs.c .* entry point"]),
        (private_violations, [r"rewardkit.loop.e .* imports rewardkit.envs.a"]),
        (lambda imps: [" ".join(g) for g in circles(imps)], [r"rewardkit.envs.a rewardkit.rewards.b"]),
    ],
)
def test_the_checks_catch_what_they_are_for(check, expected: list[str]) -> None:
    found = check(_fake_imports(FAKE))
    assert len(found) == len(expected), found
    for pattern, message in zip(expected, found, strict=True):
        assert re.search(pattern, message), (pattern, message)
    # TYPE_CHECKING imports never run: the fake loop.e -> cli import is not an edge.
    assert not any("rewardkit.cli" in m for m in layer_violations(_fake_imports(FAKE)))


CLI_MODULES = sorted(m for m in SOURCES if m.startswith("rewardkit.cli.") and m != "rewardkit.cli.__main__")


def test_cli_modules_are_found() -> None:
    assert {"rewardkit.cli.build", "rewardkit.cli.env", "rewardkit.cli.recipe"} <= set(CLI_MODULES)


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
    command = module.removeprefix("rewardkit.cli.")
    assert all(h == f"cmd_{command}" or h.startswith(f"cmd_{command}_") for h in handlers), (command, handlers)
