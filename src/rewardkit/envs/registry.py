"""The domain registry: every domain by name, imported when first asked for, wherever it is written.

:func:`get_domain` takes a built-in name, an installed package's entry point (group ``rewardkit.domains``) or the
path of a domain's folder or module written anywhere; :func:`new_domain` writes the starter domain to copy from.
It sits above every domain module: they import the contract (:mod:`rewardkit.envs.domain`), never this.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from rewardkit.envs.domain import Domain, DomainDataError
from rewardkit.envs.spec_domain import DOMAIN_NAME, SPEC_FILE, load_spec
from rewardkit.errors import UserError

# Built-in domains, imported on first use so that loading one costs nothing for the others.
BUILTIN: dict[str, str] = {
    "retail": "rewardkit.envs.retail.domain:RETAIL",
    "livestream": "rewardkit.envs.livestream:DOMAIN",
}
ENTRY_POINT_GROUP = "rewardkit.domains"  # an installed package's domains: name = "package.module:DOMAIN"
_REGISTERED: dict[str, Domain] = {}
_BY_REF: dict[str, Domain] = {}  # an entry point or an absolute path, resolved once per process
CONFIG_KEY = "domain"  # $REWARDKIT_CONFIG's top-level key naming a domain every process loads (rewards' SharedConfig)


class DomainError(UserError, ValueError):
    """A domain cannot be found or loaded: ``--domain`` (or a row's ``domain``) names no built-in, entry point or
    domain path, the path does not load, or two domains take one name."""


def register_domain(domain: Domain) -> Domain:
    """Make ``domain`` reachable by name; re-registering the same object is harmless."""
    current = _REGISTERED.get(domain.name)
    if current is not None and current is not domain:
        raise DomainError(f"domain {domain.name!r} is already registered; pick another name")
    _REGISTERED[domain.name] = domain
    return domain


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def domain_names() -> list[str]:
    """The built-in and registered domains, and those installed packages declare (entry points)."""
    return sorted({*BUILTIN, *_REGISTERED, *_entry_points()})


def _as_domain(found: Any, where: str) -> Domain:
    """``found`` (a :class:`Domain`, or a function returning one) as the domain ``where`` defines."""
    value = found() if callable(found) and not isinstance(found, Domain) else found
    if not isinstance(value, Domain):
        raise DomainError(f"{where}: defines {type(value).__name__}, not a rewardkit.envs.Domain")
    return value


def _from_path(ref: str) -> Domain:
    """The domain a folder (its ``__init__.py``) or a ``.py`` module defines as ``DOMAIN`` or ``load_domain()``;
    the folder is imported as a package, so its modules may import each other relatively. A folder holding a
    ``domain.json`` and no ``__init__.py`` is a domain given as a spec (:mod:`rewardkit.envs.spec_domain`)."""
    import hashlib
    import importlib.util
    import sys

    path = Path(ref).resolve()
    if (path / SPEC_FILE).is_file() and not (path / "__init__.py").is_file():  # a domain given as a spec alone
        try:
            return load_spec(path)
        except DomainDataError as exc:
            raise DomainError(f"domain {ref}: {exc}") from None
    target = path / "__init__.py" if path.is_dir() else path
    if not target.is_file():
        raise DomainError(f"domain {ref}: {target} not found (a domain folder holds an __init__.py)")
    name = "rewardkit_domain_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(
        name, target, submodule_search_locations=[str(path)] if path.is_dir() else None
    )
    if spec is None or spec.loader is None:
        raise DomainError(f"domain {ref}: {target} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the folder's own modules import it as their package
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise DomainError(f"domain {ref}: importing {target} raised {type(exc).__name__}: {exc}") from exc
    found = getattr(module, "DOMAIN", None) or getattr(module, "load_domain", None)
    if found is None:
        raise DomainError(f"domain {ref}: {target} defines neither DOMAIN nor load_domain()")
    return _as_domain(found, f"domain {ref}")


STARTER = Path(__file__).parent / "starter"  # the domain `rewardkit env new` writes: a lending library
STARTER_FILES = ("__init__.py", "tasks.json", "guidelines.md")
_STARTER_NAME = 'name="library"'


def new_domain(name: str, out: Path) -> list[Path]:
    """Write the starter domain, named ``name``, into the new folder ``out``; return the files written. It
    passes ``rewardkit env check`` and trains in the tiny chain as it is (``tests/test_env_new.py``)."""
    if not DOMAIN_NAME.fullmatch(name):
        raise DomainError(f"domain name {name!r}: use lower-case letters, digits and _, starting with a letter")
    if name in BUILTIN or name in _entry_points():  # it would shadow that domain, or be shadowed, by load order
        raise DomainError(f"domain name {name!r} is taken by a built-in or installed domain; pick another name")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DomainError(f"--out {out}: exists and is not an empty folder; pick a new folder")
    texts = {f: (STARTER / f).read_text(encoding="utf-8") for f in STARTER_FILES}
    if texts["__init__.py"].count(_STARTER_NAME) != 1:  # the starter itself changed: a packaging bug
        raise DomainError(f"{STARTER / '__init__.py'}: holds no single {_STARTER_NAME}; reinstall rewardkit")
    texts["__init__.py"] = texts["__init__.py"].replace(_STARTER_NAME, f'name="{name}"')
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file, text in texts.items():
        (out / file).write_text(text, encoding="utf-8")
        written.append(out / file)
    return written


def _is_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or ref.endswith(".py") or Path(ref).exists()


def _load(ref: str) -> Domain | None:
    """The domain an entry point or a path ``ref`` names, loaded once per process (a path under its absolute
    form, however it is written); None when ``ref`` is neither."""
    points = _entry_points()
    key = ref if ref in points or not _is_path(ref) else str(Path(ref).resolve())
    if key not in _BY_REF:
        if ref in points:
            domain = _as_domain(points[ref].load(), f"entry point {ref!r} ({points[ref].value})")
        elif _is_path(ref):
            domain = _from_path(ref)
        else:
            return None
        _BY_REF[key] = register_domain(domain)
    return _BY_REF[key]


def _find(ref: str) -> Domain | None:
    """The domain ``ref`` names without the config: registered, built in, an entry point or a path."""
    if ref in _REGISTERED:
        return _REGISTERED[ref]
    if ref in BUILTIN:
        module, attr = BUILTIN[ref].split(":")
        return register_domain(getattr(importlib.import_module(module), attr))
    return _load(ref)


def load_configured(ref: Any, source: str) -> Domain:
    """The domain a config's :data:`CONFIG_KEY` names (``source``: the config file, for messages), loaded and
    registered. A recipe's config names its domain so that every process reading it (each trainer rank, a rollout
    server) finds the domain the rows name, by its name too; a relative path is taken from the config's folder."""
    if not isinstance(ref, str) or not ref.strip():
        raise DomainError(
            f"{source}: {CONFIG_KEY}: must name a domain (a built-in name, an entry point or a path), got {ref!r}"
        )
    if _is_path(ref) and not Path(ref).is_absolute() and Path(source).is_file():
        ref = str(Path(source).resolve().parent / ref)  # the config's own folder, whatever a process's cwd
    try:
        found = _find(ref)
    except DomainError as exc:
        raise DomainError(f"{source}: {CONFIG_KEY}: {exc}") from None
    if found is None:
        known = ", ".join(domain_names())
        raise DomainError(
            f"{source}: {CONFIG_KEY}: unknown domain {ref!r}; known domains: {known}, or the absolute "
            "path of a domain's folder or module"
        )
    return found


def get_domain(ref: str) -> Domain:
    """The domain ``ref`` names, in this order: a registered or built-in name; an installed package's entry point
    in the group ``rewardkit.domains``; the path of a domain's folder or module, which defines ``DOMAIN`` (a
    :class:`Domain`) or ``load_domain()`` returning one; the name of the domain that ``$REWARDKIT_CONFIG``'s
    ``domain`` key names. A path or an entry point is loaded once per process, and its domain registered under its
    own name, so that ``get_domain(domain.name)`` finds it afterwards."""
    found = _find(ref)
    if found is None:
        from rewardkit.config import read_config_file

        raw, source = read_config_file()
        if raw.get(CONFIG_KEY) is not None:
            load_configured(raw[CONFIG_KEY], source)
        found = _REGISTERED.get(ref)
    if found is None:
        raise DomainError(
            f"unknown domain {ref!r}; known domains: {', '.join(domain_names())}, or the path of a domain's "
            f"folder or module (docs/domains.md)"
        )
    return found


def portable_ref(ref: str) -> str:
    """``ref`` as any process reads it, whatever its working directory: a domain's path made absolute, a name or an
    entry point as it is. What rows and configs record."""
    if ref in _REGISTERED or ref in BUILTIN or ref in _entry_points() or not _is_path(ref):
        return ref
    return str(Path(ref).resolve())
