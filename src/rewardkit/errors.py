"""The one base of every error that means "your input is wrong", not "rewardkit has a bug".

A file, a flag, a config key, a dataset row, a domain's data: each error class that reports such a thing derives
from :class:`UserError` (and from the built-in it has always been, ``ValueError`` or ``KeyError``, so existing
``except`` clauses keep working). Its message names the input (``file:line``, the key or column) and how to fix it.
The command line prints a ``UserError`` as one line and exits 2; any other exception is a bug and keeps its
traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """The user's input is wrong; the message names it and says how to fix it."""
