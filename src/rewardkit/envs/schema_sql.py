"""A spec domain's ``schema.sql``: table and index definitions only, checked by SQLite's parser before it runs.

A domain folder may come from anyone, and ``rewardkit env check`` runs its schema. A statement other than
``CREATE TABLE`` or ``CREATE [UNIQUE] INDEX`` (``ATTACH`` a file, a ``PRAGMA``, ``VACUUM INTO``, a trigger, an
``INSERT``) could write outside the folder or change what every copy of the memory does, so none may run.
:func:`check_schema_sql` splits the text into complete statements (:func:`sqlite3.complete_statement`, SQLite's own
tokenizer), reads each one's leading keywords, then runs it on a scratch in-memory database under an authorizer that
allows only what a table or index definition does (create it in ``main``, write its row of ``sqlite_master``, read
the columns its constraints name, name a function in a ``CHECK``): ``CREATE TABLE ... AS SELECT`` is refused there.
What passes is what ``executescript`` later runs, statement for statement: both read the text with SQLite's tokenizer.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from rewardkit.errors import UserError


class DomainDataError(UserError, ValueError):
    """A file the domain ships (or was pointed at) cannot be read as what it must hold; names the file."""


DEFINITIONS = (("CREATE", "TABLE"), ("CREATE", "INDEX"), ("CREATE", "UNIQUE", "INDEX"))
ONLY = "only CREATE TABLE and CREATE INDEX statements are allowed"
# What a table or index definition asks the authorizer for, and the database it may name (None: any, or none).
_ALLOWED = {
    sqlite3.SQLITE_CREATE_TABLE: "main",
    sqlite3.SQLITE_CREATE_INDEX: "main",
    sqlite3.SQLITE_INSERT: "main",  # its row of sqlite_master (_SCHEMA_ONLY)
    sqlite3.SQLITE_UPDATE: "main",
    sqlite3.SQLITE_READ: "main",  # the columns a constraint or an index names
    sqlite3.SQLITE_REINDEX: "main",  # a new index is built
    sqlite3.SQLITE_FUNCTION: None,  # length(name) in a CHECK: SQLite's own functions, none added to this connection
}
_SCHEMA_ONLY = (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE)  # writes to sqlite_master, never to a table
_NAMED = ("ATTACH", "DETACH", "PRAGMA", "SELECT", "INSERT", "UPDATE", "DELETE", "TRANSACTION", "SAVEPOINT", "RECURSIVE")
_ACTIONS = {getattr(sqlite3, f"SQLITE_{name}"): name for name in _NAMED}
_SKIP = re.compile(r"(?:\s|--[^\n]*|/\*.*?(?:\*/|$))*", re.S)  # blanks and comments before a word
_WORD = re.compile(r"[A-Za-z_]+")


def _statements(text: str) -> list[tuple[int, str]]:
    """``(offset, statement)`` of each complete statement, the last one's ``;`` optional, as SQLite splits them."""
    found, start = [], 0
    for end in (m.end() for m in re.finditer(";", text)):
        if sqlite3.complete_statement(text[start:end]):
            found.append((start, text[start:end]))
            start = end
    return [*found, (start, text[start:])]


def _lead(statement: str) -> tuple[int, tuple[str, ...]]:
    """Where the statement's first word is (past blanks and comments), and its first three words, upper-case."""
    at = pos = _SKIP.match(statement).end()  # type: ignore[union-attr]
    words: list[str] = []
    while len(words) < 3 and (word := _WORD.match(statement, pos)) is not None:
        words.append(word.group().upper())
        pos = _SKIP.match(statement, word.end()).end()  # type: ignore[union-attr]
    return at, tuple(words)


def _found(words: tuple[str, ...], statement: str) -> str:
    """What a statement is, by its leading keywords: ``ATTACH``, ``CREATE VIEW``, ``CREATE TEMP TABLE``."""
    if not words:
        return repr(statement.strip()[:20])
    if words[0] != "CREATE":
        return words[0]
    return " ".join(words[: 3 if words[1:2] in (("TEMP",), ("TEMPORARY",), ("UNIQUE",), ("VIRTUAL",)) else 2])


def _authorizer(denied: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    def authorize(action: int, first: str | None, _second: str | None, database: str | None, _by: str | None) -> int:
        allowed = action in _ALLOWED and _ALLOWED[action] in (None, database)
        if action in _SCHEMA_ONLY and first not in ("sqlite_master", "sqlite_schema"):
            allowed = False
        if not allowed:
            denied.append(_ACTIONS.get(action, f"authorizer action {action}"))
        return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY

    return authorize


def check_schema_sql(text: str, where: str) -> None:
    """Refuse ``text`` (the file ``where``) unless each of its statements defines a table or an index, in one line
    ``where:line: ...`` naming what was found."""
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    denied: list[str] = []
    scratch.set_authorizer(_authorizer(denied))
    try:
        for offset, statement in _statements(text):
            at, words = _lead(statement)
            if not statement[at:].strip(" \t\r\n;"):
                continue  # blanks, comments and empty statements: nothing runs
            line = text.count("\n", 0, offset + at) + 1
            if not any(words[: len(d)] == d for d in DEFINITIONS):
                raise DomainDataError(f"{where}:{line}: {ONLY}, found {_found(words, statement)}")
            try:
                scratch.execute(statement)
            except (sqlite3.Error, sqlite3.Warning) as exc:
                why = f"{ONLY}, found {_found(words, statement)} with {denied[0]}" if denied else str(exc)
                raise DomainDataError(f"{where}:{line}: {why}") from None
    finally:
        scratch.close()
