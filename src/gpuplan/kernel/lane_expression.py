"""A tiny, safe expression language over the lane id: parsed by hand, evaluated with numpy, no eval().

Grammar (C precedence and C integer semantics: `/` truncates toward zero, `%` takes the sign of
the dividend; comparisons and logic give 0/1):

    expr    := or
    or      := and  (('||' | 'or')  and)*
    and     := bor  (('&&' | 'and') bor)*
    bor     := bxor ('|' bxor)*
    bxor    := band ('^' band)*
    band    := eq   ('&' eq)*
    eq      := rel  (('==' | '!=') rel)*
    rel     := shift (('<' | '<=' | '>' | '>=') shift)*
    shift   := sum  (('<<' | '>>') sum)*
    sum     := prod (('+' | '-') prod)*
    prod    := unary (('*' | '/' | '%') unary)*
    unary   := ('-' | '+' | '!' | '~' | 'not') unary | atom
    atom    := INTEGER | NAME | '(' expr ')'

Names are the variables the caller provides (e.g. `lane`, `tid`, `warp`). Anything else is an
InputError naming the field and what is allowed.

Bounded work: at most MAX_TOKENS tokens, parentheses and unary operators nested at most
MAX_NESTING deep, and a tree at most MAX_TREE_DEPTH deep (`1+1+...+1` is a chain as deep as it is
long), so neither the recursive-descent parser nor the evaluator can exhaust Python's stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.validation_rules import INT64_MAX

_TOKEN = re.compile(r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z_0-9]*)|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()<>!~&|^]))")
_WORD_OPS = {"and": "&&", "or": "||", "not": "!"}

#: tokens in one expression (a lane predicate is a few dozen)
MAX_TOKENS = 10_000
#: parentheses and unary operators inside each other (each level is ~12 parser frames)
MAX_NESTING = 32
#: depth of the expression tree (the evaluator recurses once per level)
MAX_TREE_DEPTH = 200

_BINARY_LEVELS: list[tuple[str, ...]] = [
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"), ("+", "-"), ("*", "/", "%"),
]


@dataclass(frozen=True)
class Node:
    op: str  # "num", "var", a unary op ("neg", "pos", "!", "~") or a binary op
    args: tuple = ()
    value: int | str | None = None


def _tokenize(text: str, field: str) -> list[str]:
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InputError(f"{field}: cannot read '{text[pos:]}' in '{text}'; allowed: integers, "
                             "variable names, + - * / % << >> & | ^ ~ comparisons && || ! and parentheses", field=field)
        tok = m.group(1) or m.group(2) or m.group(3)
        tokens.append(_WORD_OPS.get(tok, tok))
        pos = m.end()
        if len(tokens) > MAX_TOKENS:
            raise InputError(f"{field}: more than {MAX_TOKENS} tokens; write a shorter expression", field=field,
                             allowed=f"<= {MAX_TOKENS} tokens")
    return tokens


class _Parser:
    def __init__(self, tokens: list[str], variables: tuple[str, ...], text: str, field: str):
        self.tokens, self.pos, self.variables, self.text, self.field = tokens, 0, variables, text, field
        self.nesting = 0

    def error(self, what: str) -> InputError:
        text = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return InputError(f"{self.field}: {what} in '{text}'", field=self.field)

    def deeper(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"parentheses and unary operators nest deeper than {MAX_NESTING} levels")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of expression")
        self.pos += 1
        return tok

    def parse(self) -> Node:
        node = self.binary(0)
        if self.peek() is not None:
            raise self.error(f"unexpected '{self.peek()}'")
        return node

    def binary(self, level: int) -> Node:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek() in _BINARY_LEVELS[level]:
            op = self.take()
            node = Node(op, (node, self.binary(level + 1)))
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok in ("-", "+", "!", "~"):
            self.take()
            self.deeper()
            node = Node({"-": "neg", "+": "pos"}.get(tok, tok), (self.unary(),))
            self.nesting -= 1
            return node
        return self.atom()

    def atom(self) -> Node:
        tok = self.take()
        if tok.isdigit():
            if int(tok) > INT64_MAX:  # evaluated over int64 arrays
                raise self.error(f"integer {tok[:20]}... exceeds int64 (allowed: 0 .. 2^63-1)")
            return Node("num", value=int(tok))
        if tok == "(":
            self.deeper()
            node = self.binary(0)
            if self.take() != ")":
                raise self.error("missing ')'")
            self.nesting -= 1
            return node
        if re.fullmatch(r"[A-Za-z_]\w*", tok):
            if tok not in self.variables:
                raise self.error(f"unknown name '{tok}' (allowed: {', '.join(self.variables)})")
            return Node("var", value=tok)
        raise self.error(f"unexpected '{tok}'")


def parse(text: str, variables: tuple[str, ...] = ("lane",), field: str = "expression") -> Node:
    """Parse `text` into an expression tree; raises InputError on anything outside the grammar."""
    if not text or not text.strip():
        raise InputError(f"{field}: empty expression", field=field)
    node = _Parser(_tokenize(text, field), variables, text, field).parse()
    if tree_depth(node) > MAX_TREE_DEPTH:
        raise InputError(f"{field}: the expression is deeper than {MAX_TREE_DEPTH} operations in a chain; "
                         "write a shorter one", field=field, allowed=f"a tree of depth <= {MAX_TREE_DEPTH}")
    return node


def tree_depth(node: Node) -> int:
    """Depth of an expression tree, counted without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((a, d + 1) for a in n.args)
    return deepest


def _c_div(a: np.ndarray, b: np.ndarray, field: str) -> np.ndarray:
    if np.any(b == 0):
        raise InputError(f"{field}: division by zero", field=field)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


def evaluate(node: Node, env: dict[str, np.ndarray], field: str = "expression") -> np.ndarray:
    """Evaluate a parsed tree over integer numpy arrays (one element per lane)."""
    op = node.op
    if op == "num":
        return np.asarray(node.value, dtype=np.int64)
    if op == "var":
        return np.asarray(env[node.value], dtype=np.int64)
    if len(node.args) == 1:
        x = evaluate(node.args[0], env, field)
        return {"neg": lambda: -x, "pos": lambda: x, "!": lambda: (x == 0).astype(np.int64), "~": lambda: ~x}[op]()
    a, b = (evaluate(arg, env, field) for arg in node.args)
    if op == "/":
        return _c_div(a, b, field)
    if op == "%":
        return a - _c_div(a, b, field) * b
    if op in ("<<", ">>") and np.any(b < 0):
        raise InputError(f"{field}: negative shift count", field=field)
    table = {
        "+": np.add, "-": np.subtract, "*": np.multiply, "<<": np.left_shift, ">>": np.right_shift,
        "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
        "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
        "&&": lambda x, y: (x != 0) & (y != 0), "||": lambda x, y: (x != 0) | (y != 0),
    }
    return np.asarray(table[op](a, b)).astype(np.int64)


def evaluate_over_lanes(text: str, warp_size: int = 32, field: str = "expression", **extra: np.ndarray) -> np.ndarray:
    """Value of `text` for lanes 0..warp_size-1 (`lane` bound to the lane id, plus `extra` names)."""
    env = {"lane": np.arange(warp_size, dtype=np.int64), **extra}
    node = parse(text, tuple(env), field)
    return np.broadcast_to(evaluate(node, env, field), (warp_size,) if not extra else np.broadcast(*env.values()).shape).copy()
