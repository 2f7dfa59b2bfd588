"""tau2's ``calculate`` tool without ``eval``: arithmetic parsed with :mod:`ast`."""

from __future__ import annotations

import ast
import operator
import sqlite3

from rewardkit.envs.tool import ResultCode, ToolError, tool

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers, + - * / and parentheses are allowed")


@tool
def calculate(conn: sqlite3.Connection, expression: str) -> str:
    """Evaluate arithmetic on numbers with + - * / and parentheses; the result is rounded to 2 decimals.

    tau2's calculator without ``eval``.

    Args:
        expression: e.g. '(19.99 + 5) * 2'.
    """
    if not all(c in "0123456789+-*/(). " for c in expression):
        raise ToolError(ResultCode.INVALID_ARGUMENT, "Invalid characters in expression")
    if len(expression) > 1000:
        raise ToolError(ResultCode.INVALID_ARGUMENT, "Expression too long (1000 characters at most)")
    try:
        return str(round(float(_evaluate(ast.parse(expression, mode="eval").body)), 2))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError, MemoryError) as exc:
        raise ToolError(ResultCode.INVALID_ARGUMENT, f"Invalid expression: {exc}") from None
