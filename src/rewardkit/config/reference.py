"""The reference a schema generates: the example YAML file (every key at its default, with its meaning and its
values) and the Markdown key table of ``docs/config.md``. Nothing here knows which sections exist: the caller
passes the schema (``rewardkit config example|table|check`` passes the whole file's, ``rewardkit.loop.config``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from rewardkit.config.declare import allowed, plain, yaml_scalar
from rewardkit.config.load import ConfigSchema
from rewardkit.markdown import table

# The lines around the generated table in a Markdown page; the begin marker may carry a note after its name.
TABLE_BEGIN = "<!-- rewardkit:config-table:begin (generated: rewardkit config table) -->"
TABLE_END = "<!-- rewardkit:config-table:end -->"
_BEGIN_NAME = TABLE_BEGIN.split(" (", 1)[0]

# Packages whose folder is at the top of the repository; the others are under src/.
_TOP_FOLDERS = {
    "rewardkit.rewards": "rewards",
    "rewardkit.plugins": "plugins",
    "rewardkit.data_builders": "data_builders",
    "rewardkit.recipes": "recipes",
}


def module_file(cls: type) -> str:
    """Where ``cls`` is declared, from the repository root (``rewards/think_length.py``), or from its package's."""
    for package, folder in _TOP_FOLDERS.items():
        if cls.__module__ == package or cls.__module__.startswith(package + "."):
            rest = cls.__module__.removeprefix(package).lstrip(".")
            return f"{folder}/{rest.replace('.', '/') or '__init__'}.py"
    path = cls.__module__.replace(".", "/") + ".py"
    return f"src/{path}" if cls.__module__.startswith("rewardkit.") else path  # another package's, from its root


def _first_line(cls: type) -> str:
    return (cls.__doc__ or "").strip().splitlines()[0]


def _comment(text: str, indent: str, width: int = 118) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(indent) + 2 + len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return [f"{indent}# {x}" for x in lines]


def _example_fields(cls: type, indent: str) -> list[str]:
    out: list[str] = []
    for f in dataclasses.fields(cls):
        out += _comment(f.metadata["doc"], indent)
        if dataclasses.is_dataclass(f.default):
            out.append(f"{indent}{f.name}:")
            out += _example_fields(type(f.default), indent + "  ")
        else:
            out.append(f"{indent}{f.name}: {yaml_scalar(plain(f.default))}  # {allowed(cls, f)}")
    return out


def render_example(schema: ConfigSchema, header: str) -> str:
    """The example file: ``header`` (comment lines), then every key with its default and its meaning."""
    out = [header.rstrip("\n"), ""]
    if schema.shared is not None:
        out += _comment(f"{_first_line(schema.shared)} ({module_file(schema.shared)})", "")
        out += _example_fields(schema.shared, "")
    for cls in schema.sections:
        out.append("")
        out += _comment(f"{cls.SECTION}: {_first_line(cls)} ({cls.__name__}, {module_file(cls)})", "")
        out.append(f"{cls.SECTION}:")
        out += _example_fields(cls, "  ")
    if schema.reserved:
        out.append("")
    for key, meaning in schema.reserved.items():
        out += _comment(f"{key}: {meaning}", "")
    return "\n".join(out) + "\n"


def _rows(cls: type, prefix: str = "") -> Iterator[tuple[str, type, dataclasses.Field]]:
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.default):
            yield from _rows(type(f.default), f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", cls, f


def render_table(schema: ConfigSchema) -> str:
    """The key table (Markdown): one row per key, with its default, its values and its meaning."""
    rows = []
    groups = [("", schema.shared)] if schema.shared is not None else []
    groups += [(f"{c.SECTION}.", c) for c in schema.sections]
    for prefix, cls in groups:
        where = f" ({cls.__name__}, `{module_file(cls)}`)"
        for i, (key, owner, f) in enumerate(_rows(cls, prefix)):
            meaning = f.metadata["doc"] + (where if i == 0 else "")
            rows.append((f"`{key}`", f"`{yaml_scalar(plain(f.default))}`", allowed(owner, f), meaning))
    rows += [
        (f"`{key}`", "`{}`", "mapping", meaning[:1].upper() + meaning[1:]) for key, meaning in schema.reserved.items()
    ]
    return "\n".join(table(["key", "default", "values", "meaning"], rows)) + "\n"


def table_block(table: str) -> str:
    """The marker lines and ``table`` between them, as a Markdown page carries them."""
    return f"{TABLE_BEGIN}\n{table}{TABLE_END}\n"


def table_in(text: str) -> str | None:
    """The text between the begin marker's line and the end marker, or None without both markers."""
    if _BEGIN_NAME not in text or TABLE_END not in text:
        return None
    start = text.index("\n", text.index(_BEGIN_NAME)) + 1
    return text[start : text.index(TABLE_END, start)]


def with_table(text: str, table: str) -> str:
    """``text`` with the table between its markers replaced by ``table``; ValueError without the markers."""
    current = table_in(text)
    if current is None:
        raise ValueError(f"no {_BEGIN_NAME} ... {TABLE_END} markers")
    start = text.index("\n", text.index(_BEGIN_NAME)) + 1
    return text[:start] + table + text[start + len(current) :]
