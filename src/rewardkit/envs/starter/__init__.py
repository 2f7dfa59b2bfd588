"""A lending library: find a book, lend it to a member."""

import json
import sqlite3
from pathlib import Path

from rewardkit.envs import Domain, ResultCode, Tables, ToolError, environment, tool, toolset

HERE = Path(__file__).parent
SCHEMA = """
CREATE TABLE books (book_id TEXT PRIMARY KEY, title TEXT NOT NULL, available INTEGER NOT NULL);
CREATE TABLE loans (book_id TEXT PRIMARY KEY REFERENCES books(book_id), member_id TEXT NOT NULL);
"""
BOOKS = [("b1", "Dune", 1), ("b2", "Emma", 1), ("b3", "Ulysses", 0), ("b4", "Beloved", 1), ("b5", "Middlemarch", 1)]
TABLES = Tables(SCHEMA, {"books": [{"book_id": i, "title": t, "available": a} for i, t, a in BOOKS]})


@tool
def find_book(conn: sqlite3.Connection, title: str) -> dict:
    """Find a book by its exact title.

    Args:
        title: the book's title, as the catalogue spells it
    """
    row = conn.execute("SELECT * FROM books WHERE title = ?", (title,)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, f"no book titled {title!r}")
    return {"book_id": row["book_id"], "title": row["title"], "status": "available" if row["available"] else "on loan"}


@tool(risk="write")  # a write: the harness gives it an optional idempotency key
def lend_book(conn: sqlite3.Connection, book_id: str, member_id: str) -> dict:
    """Lend an available book to a member.

    Args:
        book_id: the id find_book returned
        member_id: the member's card number
    """
    row = conn.execute("SELECT available FROM books WHERE book_id = ?", (book_id,)).fetchone()
    if row is None:
        raise ToolError(ResultCode.NOT_FOUND, f"no book {book_id!r}")
    if not row["available"]:
        raise ToolError(ResultCode.PRECONDITION_FAILED, f"book {book_id!r} is on loan")
    conn.execute("UPDATE books SET available = 0 WHERE book_id = ?", (book_id,))
    conn.execute("INSERT INTO loans VALUES (?, ?)", (book_id, member_id))
    return {"book_id": book_id, "member_id": member_id, "due_in_days": 14}


TOOLS = toolset(find_book, lend_book)


def _text(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


DOMAIN = Domain(
    name="library",
    make_env=environment(TABLES, TOOLS),  # a private copy of the tables per rollout
    tools=TOOLS,
    tasks=lambda: {t["id"]: t for t in json.loads(_text("tasks.json"))},
    splits=lambda: {"train": ["0", "1", "2", "3", "4", "5"], "test": ["6", "7", "8"]},
    policy=lambda: "You are a library assistant. Find the book by its title before you lend it.",
    guidelines=lambda: _text("guidelines.md"),  # how an LLM plays the member
    language="en",
    data_files=(HERE / "tasks.json", HERE / "guidelines.md"),
)
