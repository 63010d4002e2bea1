"""Flux-Lang expressions: symbols and field access, literals, calls and their named arguments, value
templates, ``fmt``/``parse``/``thing``/``expr`` forms, and operator formulas (kept as written, in an
``expr`` node)."""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Union

from flux.canonical import json_string

from . import ast as A
from .parse_text import (BRACKET_AFTER_GAP, FORMULA_FUNCTIONS, INT, IDENT, MAX_NESTING, OPNAME, RESERVED,
                         TextCursor)

__all__ = ["ExpressionRules", "FormulaNode", "formula_text"]

# Formula operator precedence (higher binds tighter).
_BINOPS = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
           "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}


class FormulaNode:
    """An operator-formula tree node (only exists while parsing; becomes an ``Expr``)."""

    __slots__ = ("op", "args", "height")

    def __init__(self, op: str, *args: Any):
        self.op, self.args = op, args
        self.height = 1 + max((a.height for a in args if isinstance(a, FormulaNode)), default=0)


_SIGIL = re.compile(r"\$(?=[A-Za-z_])")


def formula_text(raw: str) -> str:
    """The stored formula for source text: trimmed, ``$`` dropped before a name, comments
    dropped, line breaks (inside parentheses) read as one space; strings stay as written."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch in "\"'":
            j = i + 1
            while j < n and raw[j] != ch and raw[j] != "\n":
                j += 2 if raw[j] == "\\" else 1
            out.append(raw[i:j + 1])
            i = j + 1
        elif ch == "#":
            while i < n and raw[i] != "\n":
                i += 1
        elif ch == "\n":
            while out and out[-1] in (" ", "\t"):
                out.pop()
            out.append(" ")
            i += 1
            while i < n and raw[i] in " \t":
                i += 1
        elif ch == "$" and _SIGIL.match(raw, i):
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out).strip()


class ExpressionRules(TextCursor):
    """The expression rules of the parser (mixed into it)."""

    def make_obj(self, fields: dict, puns: Iterable[str] = ()) -> A.Node:
        """The object template (or named arguments) ``fields``, in the AST's key order; ``puns`` are
        the keys the author wrote alone (``{ ticket }``), which the AST does not keep."""
        return A.Obj(fields)

    # ---------------------------------------------------------------- expressions
    def expression(self) -> A.Node:
        self.sp()
        start = self.pos
        t = self._binary(1)
        if isinstance(t, FormulaNode) and t.op == "'":
            raise self.error("a single-quoted string may only stand inside a condition; "
                             "write \"…\"", start)
        return self._to_node(t, start)

    def _to_node(self, t: Union[A.Node, FormulaNode], start: int) -> A.Node:
        """An operator tree becomes an ``expr`` node: flux keeps the formula *as written*
        (trimmed, ``$`` sigils dropped) with every symbol it reads in ``vars``."""
        if isinstance(t, A.Node):
            return t
        vars_: dict[str, A.Node] = {}
        stack: list = [t]
        while stack:
            x = stack.pop()
            if isinstance(x, FormulaNode):
                stack.extend(x.args)
            elif isinstance(x, A.Var):
                vars_[x.name] = x
            elif isinstance(x, A.Jq) and isinstance(x.input, A.Var):
                vars_[x.input.name] = x.input
        return A.Expr(formula_text(self.src[start:self.pos]), vars_)

    def _operand(self, t: Union[A.Node, FormulaNode], pos: int) -> Union[A.Node, FormulaNode]:
        """Check a node may stand in a formula (symbols, literals, field access)."""
        if isinstance(t, FormulaNode):
            return t.args[0] if t.op == "'" and self.formula_leaves else t
        if isinstance(t, (A.Var, A.Lit)):
            return t
        if isinstance(t, A.Jq) and isinstance(t.input, A.Var):
            return t
        if isinstance(t, A.Call) and t.op in FORMULA_FUNCTIONS:
            return FormulaNode(t.op, *[self._operand(a, pos) for a in t.args])
        raise self.error(
            "an operator formula may only combine symbols, literals, field access and "
            "round/abs/min/max/len (bind other values first)", pos)

    def _peek_binop(self) -> Optional[str]:
        """The binary operator ahead (the cursor moves to it), or None (the cursor stays)."""
        save = self.pos
        self.sp()
        s = self.src[self.pos:self.pos + 2]
        if s in ("||", "&&", "==", "!=", "<=", ">="):
            return s
        c = s[:1]
        if s != "->" and c in ("<", ">", "+", "-", "*", "/", "%"):
            return c
        self.pos = save
        return None

    def _binary(self, min_prec: int) -> Union[A.Node, FormulaNode]:
        start = self.pos
        left = self._unary()
        while True:
            op = self._peek_binop()
            if op is None or _BINOPS[op] < min_prec:
                return left
            prec = _BINOPS[op]
            self.pos += len(op)
            rstart = self.pos
            right = self._binary(prec + 1)
            left = FormulaNode(op, self._operand(left, start), self._operand(right, rstart))
            if left.height + self.nest > MAX_NESTING:
                raise self.error(f"formula nests deeper than {MAX_NESTING} levels; bind parts "
                                 f"of it to names first", start)
            if prec == 3 and (nxt := self._peek_binop()) is not None and _BINOPS[nxt] == 3:
                raise self.error("comparisons do not chain; add parentheses")

    def _unary(self) -> Union[A.Node, FormulaNode]:
        self.sp()
        start = self.pos
        if self.src.startswith("!", self.pos) and not self.src.startswith("!=", self.pos):
            self.pos += 1
            self.enter(start)
            node = FormulaNode("!", self._operand(self._unary(), start))
            self.leave()
            return node
        if self.src.startswith("-", self.pos) and not self.src.startswith("->", self.pos):
            nxt = self.src[self.pos + 1:self.pos + 2]
            if not nxt.isdigit():
                self.pos += 1
                self.enter(start)
                node = FormulaNode("neg", self._operand(self._unary(), start))
                self.leave()
                return node
        return self._primary()

    def _primary(self) -> Union[A.Node, FormulaNode]:
        self.sp()
        if self.pos >= self.n:
            raise self.error("expected an expression, found end of input")
        src, ch = self.src, self.src[self.pos]
        if src.startswith("@json", self.pos):
            return self.json_node()
        if ch == '"':
            return A.Lit(self.string())
        if ch == "'":
            return FormulaNode("'", A.Lit(self._single_quoted()))
        if ch.isdigit() or (ch == "-" and src[self.pos + 1:self.pos + 2].isdigit()):
            return A.Lit(self.json_value())
        if ch in "{[":
            ok, value = self.try_json()
            if ok:
                return A.Lit(value)
            return self._template()
        if ch == "(":
            self.enter()
            self.pos += 1
            self.depth += 1
            inner = self._binary(1)
            self.expect(")")
            self.depth -= 1
            self.leave()
            return inner
        if ch == "$":
            return self._postfix(A.Var(self.sym()))
        m = OPNAME.match(src, self.pos)
        if not m:
            raise self.error(f"expected an expression, found {self._here()}")
        opname = m.group(0)
        if src.startswith("(", m.end()):
            self.pos = m.end()
            if opname == "fmt":
                return self._fmt()
            self.enter()
            if opname == "parse":
                node = self._parse_node()
            elif opname == "expr" and self._at_expr_call():
                node = self._expr_call()
            else:
                node = A.Call(opname, self._call_args())
            self.leave()
            return node
        word = self.ident()
        if word == "true":
            return A.Lit(True)
        if word == "false":
            return A.Lit(False)
        if word == "null":
            return A.Lit(None)
        if word == "peek":
            return A.Peek(self.sym())
        if word == "thing":
            return self._thing()
        return self._postfix(A.Var(word))

    def _postfix(self, var: A.Var) -> A.Node:
        """``x.a.0[1]["k"]?`` — field access over a symbol, as a ``jq`` node.

        The path is flux's canonical jq path: ``.a`` fields, ``.0`` indexes (``[1]`` is read as
        ``.1``), and ``["k"]`` JSON-string keys, which take a leading ``.`` when they come first.
        """
        parts: list[str] = []
        src = self.src
        while self.pos < self.n:
            ch = src[self.pos]
            if ch in " \t" and (gap := BRACKET_AFTER_GAP.match(src, self.pos)):
                # `headers ["content-type"]`: blanks before a bracketed key or index, as flux reads it
                self.pos = gap.end()
                ch = "["
            if ch == "." and (m := IDENT.match(src, self.pos + 1)):
                parts.append("." + m.group(0))
                self.pos = m.end()
            elif ch == "." and (m := INT.match(src, self.pos + 1)):
                parts.append("." + m.group(0))
                self.pos = m.end()
            elif ch == "[":
                save = self.pos
                self.pos += 1
                self.depth += 1
                self.sp()
                if self.pos < self.n and src[self.pos] == '"':
                    key = json_string(self.string())
                    parts.append(("[" if parts else ".[") + key + "]")
                else:
                    mi = INT.match(src, self.pos)
                    if not mi:
                        self.pos, self.depth = save, self.depth - 1
                        break
                    parts.append("." + mi.group(0))
                    self.pos = mi.end()
                self.expect("]")
                self.depth -= 1
            else:
                break
        optional = False
        if self.pos < self.n and src[self.pos] == "?":
            self.pos += 1
            optional = True
        if not parts and not optional:
            return var
        return A.Jq("".join(parts), var, optional)

    def _at_expr_call(self) -> bool:
        """``expr("…", …)``: the explicit formula node (a string first argument)."""
        save = self.pos
        self.pos += 1
        ok = self.at_string()
        self.pos = save
        return ok

    def _expr_call(self) -> A.Node:
        """``expr("price * qty", price: $price, qty: $qty)`` → ``Expr(formula, vars)``."""
        self.expect("(")
        self.depth += 1
        formula = self.string("the formula")
        vars_: dict[str, A.Node] = {}
        while self.accept(","):
            if self.peek(")"):
                break
            kpos = self.pos
            key = self.ident("a variable name")
            if key in vars_:
                raise self.error(f"duplicate named argument `{key}`", kpos)
            if self.peek(",") or self.peek(")"):
                vars_[key] = A.Var(key)
            else:
                self.expect(":")
                vars_[key] = self.expression()
        self.expect(")", "',' or ')'")
        self.depth -= 1
        return A.Expr(formula, vars_)

    def _fmt(self) -> A.Node:
        self.expect("(")
        self.depth += 1
        template = self.string("a fmt template string")
        self.accept(",")
        self.expect(")")
        self.depth -= 1
        return A.Fmt(template)

    def _parse_node(self) -> A.Node:
        self.expect("(")
        self.depth += 1
        value = self.expression()
        self.expect(",")
        self.expect_word("as")
        self.expect(":")
        as_type = self.string("a parse target such as \"f64\"")
        self.accept(",")
        self.expect(")")
        self.depth -= 1
        return A.Parse(value, as_type)

    def _thing(self) -> A.Node:
        kind = self.ident("a thing kind")
        if kind == "custom" and self.at_string():
            # `thing custom "widget" key "w-1"`: a domain-specific kind, spelled as a string
            kind = self.string("the custom kind")
            sel = self.ident("a thing selector (id, name, path, query or key)")
            if sel not in A.ThingRef.SELECTORS:
                raise self.error(f"unknown thing selector `{sel}`")
            return A.Thing(A.ThingRef(kind, sel, self.string("the thing's selector value"), True))
        sel = self.ident("a thing selector (id, name, path, query or key)")
        if sel not in A.ThingRef.SELECTORS:
            raise self.error(f"unknown thing selector `{sel}`")
        value = self.string("the thing's selector value")
        custom = kind not in A.ThingRef.KINDS
        return A.Thing(A.ThingRef(kind, sel, value, custom))

    def _template(self) -> A.Node:
        """``{ key: expr, … }`` / ``[ expr, … ]`` value templates (non-JSON leaves allowed)."""
        self.enter()
        try:
            return self._template_body()
        finally:
            self.leave()

    def _template_body(self) -> A.Node:
        open_ch = self.src[self.pos]
        close = "}" if open_ch == "{" else "]"
        self.pos += 1
        self.depth += 1
        if open_ch == "[":
            items = []
            while not self.accept("]"):
                items.append(self.expression())
                if not self.accept(","):
                    self.expect("]", "',' or ']'")
                    break
            self.depth -= 1
            return A.ListExpr(tuple(items))
        fields: dict[str, A.Node] = {}
        puns: list[str] = []
        while not self.accept(close):
            self.sp()
            kpos = self.pos
            quoted = self.at_string()
            key = self.string("an object key") if quoted else self.ident("a key")
            if key in fields:
                raise self.error(f"duplicate key `{key}`", kpos)
            if not quoted and (self.peek(",") or self.peek(close)):
                # a field pun: `{ ticket, hits }` is `{ ticket: ticket, hits: hits }`
                if key in RESERVED:
                    raise self.error(f"`{key}` is a reserved word; write `{key}: ${key}`", kpos)
                fields[key] = A.Var(key)
                puns.append(key)
            else:
                self.expect(":")
                fields[key] = self.expression()
            if not self.accept(","):
                self.expect(close, "',' or '}'")
                break
        self.depth -= 1
        return self.make_obj(fields, puns)

    def _call_args(self) -> tuple:
        """``op(…)`` arguments: positional, or ``key: v`` / pun fields forming one object."""
        self.expect("(")
        self.depth += 1
        items: list[tuple[str, Any, Any]] = []  # (kind, key, node)
        while not self.accept(")"):
            self.sp()
            m = IDENT.match(self.src, self.pos)
            if m:
                after = m.end()
                while after < self.n and self.src[after] in " \t\n":
                    after += 1
                nxt = self.src[after:after + 2]
                if nxt[:1] == ":" and nxt != "::":
                    self.pos = after + 1
                    items.append(("kw", m.group(0), self.expression()))
                elif nxt[:1] in (",", ")") and m.group(0) not in RESERVED and not self.no_puns:
                    self.pos = m.end()
                    items.append(("bare", m.group(0), A.Var(m.group(0))))
                else:
                    items.append(("pos", None, self.expression()))
            else:
                items.append(("pos", None, self.expression()))
            if not self.accept(","):
                self.expect(")", "',' or ')'")
                break
        self.depth -= 1
        kinds = {k for k, _, _ in items}
        if "kw" in kinds or (len(items) >= 2 and kinds == {"bare"}):
            if "pos" in kinds:
                raise self.error("cannot mix `key: value` arguments with positional ones")
            fields: dict[str, A.Node] = {}
            for _, key, node in items:
                if key in fields:
                    raise self.error(f"duplicate named argument `{key}`")
                fields[key] = node
            return (self.make_obj(fields, [key for kind, key, _ in items if kind == "bare"]),)
        return tuple(node for _, _, node in items)
