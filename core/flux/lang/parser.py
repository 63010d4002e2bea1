"""A hand-written recursive-descent parser for canonical Flux-Lang text (spec §5.2–§5.4).

It reads everything :mod:`flux.lang.formatter` writes, plus the looser spellings people and older
engines write: ``$name`` as well as bare symbols, ``#`` comments, any consistent indentation,
delimited expressions over several lines with trailing commas, triple-quoted verbatim strings, plain-ms
durations and a leading ``goal "…"`` line.

The parser works on the source text with a cursor rather than a token list, because the grammar is
line-sensitive outside delimiters (a newline ends a statement) and whitespace-insensitive inside
them, and triple-quoted strings may run across lines anywhere. ``self.depth`` counts open delimiters.

Every error is a :class:`ParseError` whose message is one line: ``line N, col M: <what>``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional, Union

from flux.canonical import canonical_json, json_string, scrub_text, scrub_value
from flux.errors import FluxError

from . import ast as A
from . import program as P
from .astjson import AstJsonError, node_from_json

__all__ = ["ParseError", "parse", "parse_program", "parse_expression", "RESERVED", "STATEMENT_KEYWORDS",
           "VALUE_WORDS", "FORMULA_FUNCTIONS", "MAX_NESTING", "MAX_JSON_DEPTH"]

#: How deeply blocks, templates, calls, parentheses and operator formulas may nest. Real plans stay
#: far below it; the limit keeps every later recursive walk (formatter, AST JSON, hashes,
#: interpreter) well inside Python's stack.
MAX_NESTING = 64
#: How deeply a JSON literal may nest: serde_json's own recursion limit, so flux reads the same.
MAX_JSON_DEPTH = 128
_U64_MAX = 2 ** 64 - 1
_U32_MAX = 2 ** 32 - 1


class ParseError(FluxError):
    """Flux-Lang text that does not parse. ``line``/``col`` are 1-based."""

    def __init__(self, line: int, col: int, what: str):
        self.line, self.col, self.what = line, col, what
        super().__init__(f"line {line}, col {col}: {what}")


#: Words that start a statement (a bare call to an op with one of these names uses ``do``).
STATEMENT_KEYWORDS = frozenset("""
    when unless each repeat seq ctx match route fallback loop timeout budget with_tools parallel
    retry assert try race scope saga pipe confirm throttle debounce verify memo once checkpoint
    await return do
""".split())

#: Words the formatter spells with ``$`` when they name a symbol (``$branch``), and an op that is one
#: of them is called with ``do`` (``do risk …``): flux's reserved set. In expression position the
#: parser still reads any of them not followed by ``(`` as a plain symbol (``create(branch: branch)``),
#: except the literals and the ``peek``/``thing`` forms (:data:`VALUE_WORDS`).
RESERVED = STATEMENT_KEYWORDS | frozenset("""
    flow goal else in until case default branch catch finally step undo purpose include exclude
    every for flat contains fmt peek parse thing true false null
    agent agent_loop backoff board channel datasource delay journey op per permissions risk trigger
""".split())

#: Words that open a clause of the statement above them (``else``, ``catch``, …): a line may not
#: start with one on its own, though ``else.x`` or ``$else`` are symbols like any other.
CLAUSE_WORDS = frozenset("else case default branch catch finally step undo".split())

#: Words that read as something other than a symbol in expression position.
VALUE_WORDS = frozenset({"true", "false", "null", "peek", "thing"})

#: Functions allowed inside an operator formula.
FORMULA_FUNCTIONS = frozenset({"round", "abs", "min", "max", "len"})

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_DECL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_TYPENAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")
#: a `$`-spelled symbol may start with a digit (flux: `$9arg`); a bare one may not
_SIGIL_NAME = re.compile(r"[A-Za-z0-9_]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_INT = re.compile(r"[0-9]+")
#: blanks, then a bracket opening a string key or an index (``x ["k"]``, ``x [0]``)
_BRACKET_AFTER_GAP = re.compile(r"[ \t]+(?=\[[ \t]*[\"0-9])")

# Formula operator precedence (higher binds tighter).
_BINOPS = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
           "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
_UNARY_PREC = 6


class _F:
    """An operator-formula tree node (only exists while parsing; becomes an ``Expr``)."""

    __slots__ = ("op", "args", "height")

    def __init__(self, op: str, *args: Any):
        self.op, self.args = op, args
        self.height = 1 + max((a.height for a in args if isinstance(a, _F)), default=0)


def _json_number(text: str) -> Union[int, float]:
    """A JSON number as serde_json reads it; ``ValueError`` when it does not fit an f64."""
    if "." not in text and "e" not in text and "E" not in text and len(text) <= 21:
        v = int(text)
        # serde_json keeps integers only within i64/u64; anything larger becomes an f64.
        if -(2 ** 63) <= v < 2 ** 64:
            return v
    f = float(text)
    if f in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return f


class _Parser:
    def __init__(self, src: str):
        # Unpaired surrogates become U+FFFD (flux.canonical.scrub_text), as everywhere text is
        # hashed or stored, so a parsed AST always hashes and formats.
        self.src = scrub_text(src.replace("\r\n", "\n"))
        self.n = len(self.src)
        self.pos = 0
        self.depth = 0
        #: open syntactic nesting levels (blocks, templates, calls, parentheses, unary operators)
        self.nest = 0
        #: open JSON containers in the literal being read
        self.json_nest = 0
        #: formula text (stored without `$`) never uses call-argument puns
        self.no_puns = False
        #: reading a stored formula for evaluation: single-quoted strings are plain literals
        self.formula_leaves = False

    # ---------------------------------------------------------------- errors and positions
    def error(self, what: str, pos: Optional[int] = None) -> ParseError:
        p = self.pos if pos is None else pos
        line = self.src.count("\n", 0, p) + 1
        col = p - (self.src.rfind("\n", 0, p) + 1) + 1
        return ParseError(line, col, what)

    def enter(self, pos: Optional[int] = None) -> None:
        """Open one nesting level; a clean error past :data:`MAX_NESTING`."""
        self.nest += 1
        if self.nest > MAX_NESTING:
            raise self.error(f"nesting deeper than {MAX_NESTING} levels; bind inner values to "
                             f"names first", pos)

    def leave(self) -> None:
        self.nest -= 1

    def _here(self) -> str:
        if self.pos >= self.n:
            return "end of input"
        ch = self.src[self.pos]
        return "end of line" if ch == "\n" else repr(ch)

    # ---------------------------------------------------------------- low level
    def sp(self) -> None:
        """Skip blanks and comments; inside delimiters newlines are blanks too."""
        src, n = self.src, self.n
        while self.pos < n:
            ch = src[self.pos]
            if ch in " \t" or (ch == "\n" and self.depth > 0):
                self.pos += 1
            elif ch == "#":
                end = src.find("\n", self.pos)
                self.pos = n if end < 0 else end
            else:
                break

    def at_eol(self) -> bool:
        self.sp()
        return self.pos >= self.n or self.src[self.pos] == "\n"

    def eol(self) -> None:
        if not self.at_eol():
            raise self.error(f"unexpected {self._here()}, expected end of line")
        if self.pos < self.n:
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.sp()
        return self.src.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: Optional[str] = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected {what or repr(s)}, found {self._here()}")

    def word_at(self, pos: int) -> Optional[str]:
        m = _IDENT.match(self.src, pos)
        return m.group(0) if m else None

    def peek_word(self) -> Optional[str]:
        self.sp()
        return self.word_at(self.pos)

    def accept_word(self, w: str) -> bool:
        self.sp()
        if self.src.startswith(w, self.pos):
            end = self.pos + len(w)
            if end >= self.n or not (self.src[end].isalnum() or self.src[end] == "_"):
                self.pos = end
                return True
        return False

    def expect_word(self, w: str) -> None:
        if not self.accept_word(w):
            raise self.error(f"expected `{w}`, found {self._here()}")

    def ident(self, what: str = "a name") -> str:
        self.sp()
        m = _IDENT.match(self.src, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self._here()}")
        self.pos = m.end()
        return m.group(0)

    def sym(self, what: str = "a symbol") -> str:
        """A symbol, spelled ``$name`` or bare ``name``."""
        self.sp()
        if self.pos < self.n and self.src[self.pos] == "$":
            self.pos += 1
            m = _SIGIL_NAME.match(self.src, self.pos)
            if not m:
                raise self.error(f"expected {what} after `$`")
            self.pos = m.end()
            return m.group(0)
        return self.ident(what)

    def sym_list(self) -> tuple:
        out = [self.sym()]
        while self.accept(","):
            out.append(self.sym())
        return tuple(out)

    def integer(self, what: str = "a whole number", most: int = _U64_MAX) -> int:
        self.sp()
        m = _INT.match(self.src, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self._here()}")
        digits = m.group(0)
        if len(digits) > 20 or int(digits) > most:
            raise self.error(f"{what} is too large (at most {most})")
        self.pos = m.end()
        return int(digits)

    def duration(self) -> int:
        """``Nm``, ``Ns``, ``Nms`` or plain ``N`` (milliseconds)."""
        v = self.integer("a duration")
        if self.src.startswith("ms", self.pos):
            self.pos += 2
            return v
        for unit, mult in (("s", 1000), ("m", 60000)):
            if self.src.startswith(unit, self.pos):
                end = self.pos + 1
                if end >= self.n or not (self.src[end].isalnum() or self.src[end] == "_"):
                    if v * mult > _U64_MAX:
                        raise self.error("the duration is too long")
                    self.pos = end
                    return v * mult
        if self.pos < self.n and (self.src[self.pos].isalnum() or self.src[self.pos] == "_"):
            raise self.error("unknown duration unit (use ms, s or m)")
        return v

    def string(self, what: str = "a string") -> str:
        """A JSON string literal or a verbatim ``\"\"\"…\"\"\"`` string."""
        self.sp()
        src, start = self.src, self.pos
        if src.startswith('"""', start):
            end = src.find('"""', start + 3)
            if end < 0:
                raise self.error('unterminated """ string', start)
            self.pos = end + 3
            return src[start + 3:end]
        if start >= self.n or src[start] != '"':
            raise self.error(f"expected {what}, found {self._here()}")
        i = start + 1
        while i < self.n:
            ch = src[i]
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                break
            if ch == "\n":
                raise self.error("unterminated string", start)
            i += 1
        else:
            raise self.error("unterminated string", start)
        try:
            value = json.loads(src[start:i + 1])
        except ValueError as exc:
            raise self.error(f"bad string literal: {exc.msg}", start) from None
        self.pos = i + 1
        # `\ud83d` escapes decode to unpaired surrogates: the one rule replaces them.
        return scrub_text(value)

    def _single_quoted(self) -> str:
        """``'text'`` inside a condition: flux keeps it verbatim in the formula; no escapes but
        ``\\'``."""
        start = self.pos
        i = start + 1
        out = []
        while i < self.n and self.src[i] != "'":
            if self.src[i] == "\n":
                break
            if self.src[i] == "\\" and i + 1 < self.n:
                i += 1
            out.append(self.src[i])
            i += 1
        if i >= self.n or self.src[i] != "'":
            raise self.error("unterminated string", start)
        self.pos = i + 1
        return "".join(out)

    def at_string(self) -> bool:
        self.sp()
        return self.pos < self.n and self.src[self.pos] == '"'

    # ---------------------------------------------------------------- JSON values
    def json_value(self) -> Any:
        """A JSON value in which any string may be spelled ``\"\"\"…\"\"\"``."""
        self.sp()
        if self.pos >= self.n:
            raise self.error("expected a JSON value, found end of input")
        ch = self.src[self.pos]
        if ch == '"':
            return self.string()
        if ch in "{[":
            self.json_nest += 1
            if self.json_nest > MAX_JSON_DEPTH:
                err = self.error(f"JSON nests deeper than {MAX_JSON_DEPTH} levels")
                err.final = True  # not a reason to re-read the text as a template
                raise err
            try:
                return self._json_container(ch)
            finally:
                self.json_nest -= 1
        start = self.pos
        m = _NUMBER.match(self.src, self.pos)
        if m and m.end() > self.pos:
            try:
                value = _json_number(m.group(0))
            except ValueError:
                raise self.error("number out of range (it does not fit a 64-bit float)",
                                 start) from None
            self.pos = m.end()
            return value
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.accept_word(word):
                return value
        raise self.error(f"expected a JSON value, found {self._here()}")

    def _json_container(self, ch: str) -> Any:
        if ch == "{":
            self.pos += 1
            self.depth += 1
            out: dict[str, Any] = {}
            # Trailing commas are accepted: delimited values may span lines (§5.4).
            while not self.accept("}"):
                key = self.string("an object key")
                self.expect(":")
                out[key] = self.json_value()
                if not self.accept(","):
                    self.expect("}", "',' or '}'")
                    break
            self.depth -= 1
            return out
        if ch == "[":
            self.pos += 1
            self.depth += 1
            items: list[Any] = []
            while not self.accept("]"):
                items.append(self.json_value())
                if not self.accept(","):
                    self.expect("]", "',' or ']'")
                    break
            self.depth -= 1
            return items
        raise AssertionError(ch)

    def try_json(self) -> tuple[bool, Any]:
        """Try a JSON value here; on failure restore the cursor (templates share ``{``/``[``)."""
        save_pos, save_depth, save_json = self.pos, self.depth, self.json_nest
        try:
            v = self.json_value()
        except ParseError as exc:
            if getattr(exc, "final", False):
                raise
            self.pos, self.depth, self.json_nest = save_pos, save_depth, save_json
            return False, None
        # A JSON value must not run on into template syntax (e.g. `[1, 2].x` is not a literal).
        return True, v

    def json_node(self) -> A.Node:
        start = self.pos
        self.expect("@json")
        try:
            v = self.json_value()
        except ParseError as exc:  # flux: "invalid `@json` …" — the error names the escape
            if getattr(exc, "final", False) or exc.what.startswith("invalid `@json`"):
                raise
            raise ParseError(exc.line, exc.col, f"invalid `@json` value: {exc.what}") from None
        try:
            return node_from_json(v)
        except AstJsonError as exc:
            raise self.error(f"bad @json node: {exc}", start) from None

    # ---------------------------------------------------------------- types
    def type_ref(self) -> A.TypeRef:
        self.sp()
        m = _TYPENAME.match(self.src, self.pos)
        if not m:
            raise self.error(f"expected a type, found {self._here()}")
        name = m.group(0)
        self.pos = m.end()
        # flux matches the built-in labels exactly: `string` is a named type, `String` is not.
        for tag, label in A.TypeRef.BUILTINS.items():
            if name == label:
                return A.TypeRef(tag)
        if name == "List" and self.src.startswith("<", self.pos):
            self.pos += 1
            inner = self.type_ref()
            self.expect(">")
            return A.TypeRef.list_of(inner)
        return A.TypeRef.named(name)

    # ---------------------------------------------------------------- expressions
    def expression(self) -> A.Node:
        self.sp()
        start = self.pos
        t = self._binary(1)
        if isinstance(t, _F) and t.op == "'":
            raise self.error("a single-quoted string may only stand inside a condition; "
                             "write \"…\"", start)
        return self._to_node(t, start)

    def _to_node(self, t: Union[A.Node, _F], start: int) -> A.Node:
        """An operator tree becomes an ``expr`` node: flux keeps the formula *as written*
        (trimmed, ``$`` sigils dropped) with every symbol it reads in ``vars``."""
        if isinstance(t, A.Node):
            return t
        vars_: dict[str, A.Node] = {}
        stack: list = [t]
        while stack:
            x = stack.pop()
            if isinstance(x, _F):
                stack.extend(x.args)
            elif isinstance(x, A.Var):
                vars_[x.name] = x
            elif isinstance(x, A.Jq) and isinstance(x.input, A.Var):
                vars_[x.input.name] = x.input
        return A.Expr(formula_text(self.src[start:self.pos]), vars_)

    def _operand(self, t: Union[A.Node, _F], pos: int) -> Union[A.Node, _F]:
        """Check a node may stand in a formula (symbols, literals, field access)."""
        if isinstance(t, _F):
            return t.args[0] if t.op == "'" and self.formula_leaves else t
        if isinstance(t, (A.Var, A.Lit)):
            return t
        if isinstance(t, A.Jq) and isinstance(t.input, A.Var):
            return t
        if isinstance(t, A.Call) and t.op in FORMULA_FUNCTIONS:
            return _F(t.op, *[self._operand(a, pos) for a in t.args])
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

    def _binary(self, min_prec: int) -> Union[A.Node, _F]:
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
            left = _F(op, self._operand(left, start), self._operand(right, rstart))
            if left.height + self.nest > MAX_NESTING:
                raise self.error(f"formula nests deeper than {MAX_NESTING} levels; bind parts "
                                 f"of it to names first", start)
            if prec == 3 and (nxt := self._peek_binop()) is not None and _BINOPS[nxt] == 3:
                raise self.error("comparisons do not chain; add parentheses")

    def _unary(self) -> Union[A.Node, _F]:
        self.sp()
        start = self.pos
        if self.src.startswith("!", self.pos) and not self.src.startswith("!=", self.pos):
            self.pos += 1
            self.enter(start)
            node = _F("!", self._operand(self._unary(), start))
            self.leave()
            return node
        if self.src.startswith("-", self.pos) and not self.src.startswith("->", self.pos):
            nxt = self.src[self.pos + 1:self.pos + 2]
            if not nxt.isdigit():
                self.pos += 1
                self.enter(start)
                node = _F("neg", self._operand(self._unary(), start))
                self.leave()
                return node
        return self._primary()

    def _primary(self) -> Union[A.Node, _F]:
        self.sp()
        if self.pos >= self.n:
            raise self.error("expected an expression, found end of input")
        src, ch = self.src, self.src[self.pos]
        if src.startswith("@json", self.pos):
            return self.json_node()
        if ch == '"':
            return A.Lit(self.string())
        if ch == "'":
            return _F("'", A.Lit(self._single_quoted()))
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
        m = _OPNAME.match(src, self.pos)
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
            if ch in " \t" and (gap := _BRACKET_AFTER_GAP.match(src, self.pos)):
                # `headers ["content-type"]`: blanks before a bracketed key or index, as flux reads it
                self.pos = gap.end()
                ch = "["
            if ch == "." and (m := _IDENT.match(src, self.pos + 1)):
                parts.append("." + m.group(0))
                self.pos = m.end()
            elif ch == "." and (m := _INT.match(src, self.pos + 1)):
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
                    mi = _INT.match(src, self.pos)
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
            else:
                self.expect(":")
                fields[key] = self.expression()
            if not self.accept(","):
                self.expect(close, "',' or '}'")
                break
        self.depth -= 1
        return A.Obj(fields)

    def _call_args(self) -> tuple:
        """``op(…)`` arguments: positional, or ``key: v`` / pun fields forming one object."""
        self.expect("(")
        self.depth += 1
        items: list[tuple[str, Any, Any]] = []  # (kind, key, node)
        while not self.accept(")"):
            self.sp()
            m = _IDENT.match(self.src, self.pos)
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
            return (A.Obj(fields),)
        return tuple(node for _, _, node in items)

    # ---------------------------------------------------------------- lines and blocks
    def peek_line(self) -> Optional[tuple[int, int]]:
        """The next line holding a statement: ``(indent, content_pos)``; None at end of input.

        Blank and comment-only lines are skipped (and consumed).
        """
        src = self.src
        while self.pos < self.n:
            i = self.pos
            while i < self.n and src[i] in " \t":
                i += 1
            if i >= self.n:
                self.pos = self.n
                return None
            if src[i] == "\n" or src[i] == "#":
                end = src.find("\n", i)
                self.pos = self.n if end < 0 else end + 1
                continue
            lead = src[self.pos:i]
            if "\t" in lead:
                raise self.error("tabs are not allowed in indentation",
                                 self.pos + lead.index("\t"))
            return len(lead), i
        return None

    def block(self, parent: int) -> tuple:
        first = self.peek_line()
        if first is None or first[0] <= parent:
            return ()
        self.enter(first[1])
        try:
            return self._block_at(parent, first[0])
        finally:
            self.leave()

    def _block_at(self, parent: int, bi: int) -> tuple:
        out: list[A.Node] = []
        while True:
            pk = self.peek_line()
            if pk is None:
                break
            ind, cpos = pk
            if ind < bi:
                if ind > parent:
                    raise self.error("inconsistent indentation", cpos)
                break
            if ind > bi:
                raise self.error("unexpected indentation", cpos)
            self.pos = cpos
            node = self.statement(bi)
            if node is not None:
                out.append(node)
        return tuple(out)

    def clause(self, indent: int, words: tuple[str, ...]) -> Optional[str]:
        """If the next line sits at ``indent`` and starts with one of ``words``, enter it."""
        save = self.pos
        pk = self.peek_line()
        if pk is not None and pk[0] == indent:
            w = self.word_at(pk[1])
            if w in words:
                self.pos = pk[1] + len(w)
                return w
        self.pos = save
        return None

    def clause_indent(self, parent: int) -> Optional[int]:
        save = self.pos
        pk = self.peek_line()
        self.pos = save
        if pk is None or pk[0] <= parent:
            return None
        return pk[0]

    def arrow_bind(self) -> Optional[str]:
        if self.accept("->"):
            return self.sym()
        return None

    # ---------------------------------------------------------------- statements
    def statement(self, indent: int) -> Optional[A.Node]:
        src, start = self.src, self.pos
        if src.startswith("@json", start):
            node = self.json_node()
            self.eol()
            return node
        if src.startswith("@effect", start):
            return self._effect(indent)
        word = self.word_at(start)
        if src.startswith("$", start):
            sym_start = start + 1
            sm = _SIGIL_NAME.match(src, sym_start)
            sym_word = sm.group(0) if sm else None
        else:
            sym_start, sym_word = start, word
        if sym_word is not None:
            after = sym_start + len(sym_word)
            j = after
            while j < self.n and src[j] in " \t":
                j += 1
            two = src[j:j + 2]
            if two == "+=":
                self.pos = after
                return self._ctx_append(sym_word)
            if (two[:1] == "=" and two != "==") or (two[:1] == ":" and two != "::"):
                self.pos = after
                return self._bind(sym_word, A.Bind)
        if word == "until":
            raise self.error("`until` is only valid as the first line of a `repeat`/`loop` body")
        if word in CLAUSE_WORDS and src[start + len(word):start + len(word) + 1] not in (".", "(", "["):
            raise self.error(f"`{word}` must follow the body of the statement it belongs to")
        if word is not None and word in STATEMENT_KEYWORDS:
            nxt = src[start + len(word):start + len(word) + 1]
            if nxt not in (".", "-", "("):
                self.pos = start + len(word)
                return getattr(self, "_st_" + word)(indent)
        if word == "goal" and indent >= 0:
            self.pos = start + 4
            if self.at_string():
                self.string()
                self.eol()
                return None
            self.pos = start
        node = self.expression()
        self.eol()
        return node

    def _effect(self, indent: int) -> A.Node:
        self.expect("@effect")
        self.expect("(")
        tpos = self.pos
        tag = self.ident("an effect tag")
        if tag not in A.FLOW_EFFECTS:
            raise self.error(f"unknown effect `{tag}`", tpos)
        self.expect(")")
        self.eol()
        pk = self.peek_line()
        if pk is None or pk[0] != indent:
            raise self.error("@effect(…) must be followed by a bind or memo on the next line")
        self.pos = pk[1]
        node = self.statement(indent)
        if not isinstance(node, (A.Bind, A.Memo)) or node.effect is not None:
            raise self.error("@effect(…) must be followed by a bind or memo", pk[1])
        return type(node)(node.name, node.value, node.ty, tag)

    def _bind(self, name: str, cls: type) -> A.Node:
        ty = self.type_ref() if self.accept(":") else None
        self.expect("=")
        value = self.expression()
        self.eol()
        return cls(name, value, ty)

    def _ctx_append(self, name: str) -> A.Node:
        self.expect("+=")
        add = () if self.at_eol() else self.sym_list()
        self.eol()
        return A.CtxAppend(name, add)

    def _st_when(self, indent: int) -> A.Node:
        cond = self.expression()
        self.eol()
        then = self.block(indent)
        otherwise: tuple = ()
        if self.clause(indent, ("else",)):
            self.eol()
            otherwise = self.block(indent)
        return A.When(cond, then, otherwise)

    def _st_unless(self, indent: int) -> A.Node:
        cond = self.expression()
        self.eol()
        return A.Unless(cond, self.block(indent))

    def _st_each(self, indent: int) -> A.Node:
        item = self.sym("the item symbol")
        self.expect_word("in")
        source = self.expression()
        collect, flat = None, False
        if self.accept("->"):
            save = self.pos
            if self.accept_word("flat") and not self.at_eol():
                flat = True
            else:
                self.pos = save
            collect = self.sym()
        self.eol()
        return A.Each(source, item, self.block(indent), collect, flat)

    def _st_repeat(self, indent: int) -> A.Node:
        mx = self.integer("the repeat count", _U32_MAX)
        until = None
        if self.accept(","):
            self.expect_word("until")
            self.expect(":")
            until = self.expression()
        collect = self.arrow_bind()
        self.eol()
        until = self._body_until(indent, until)
        body = self.block(indent)
        return A.Repeat(mx, until, body, collect)

    def _body_until(self, indent: int, header: Optional[A.Node]) -> Optional[A.Node]:
        """The older spelling of a `repeat`/`loop` guard: `until <cond>` as the first body line."""
        save = self.pos
        pk = self.peek_line()
        if pk is None or pk[0] <= indent or self.word_at(pk[1]) != "until":
            self.pos = save
            return header
        if header is not None:
            raise self.error("`until` may be given once, in the header or as the first body line",
                             pk[1])
        self.pos = pk[1] + len("until")
        cond = self.expression()
        self.eol()
        return cond

    def _st_seq(self, indent: int) -> A.Node:
        bind = self.arrow_bind()
        self.eol()
        return A.Seq(self.block(indent), bind)

    def _st_pipe(self, indent: int) -> A.Node:
        bind = self.arrow_bind()
        self.eol()
        return A.Pipe(self.block(indent), bind)

    def _st_ctx(self, indent: int) -> A.Node:
        name = self.sym("the context name")
        self.eol()
        purpose = budget = None
        include: tuple = ()
        exclude: tuple = ()
        ci = self.clause_indent(indent)
        seen: set[str] = set()
        while ci is not None:
            w = self.clause(ci, ("purpose", "budget", "include", "exclude"))
            if w is None:
                pk = self.peek_line()
                if pk is not None and pk[0] > indent:
                    raise self.error("expected purpose, budget, include or exclude", pk[1])
                break
            if w in seen:
                raise self.error(f"`{w}` given twice")
            seen.add(w)
            if w == "purpose":
                purpose = self.string()
            elif w == "budget":
                budget = self.integer()
            elif w == "include":
                include = self.sym_list()
            else:
                exclude = self.sym_list()
            self.eol()
        return A.Ctx(name, purpose, include, exclude, budget)

    def _cases(self, indent: int, label_kind: str) -> tuple[list, tuple]:
        """``case …``/``default`` clauses one level in, each with a body one level further."""
        cases: list = []
        default: tuple = ()
        ci = self.clause_indent(indent)
        saw_default = False
        while ci is not None:
            w = self.clause(ci, ("case", "default"))
            if w is None:
                pk = self.peek_line()
                if pk is not None and pk[0] > indent:
                    raise self.error("expected `case` or `default`", pk[1])
                break
            if saw_default:
                raise self.error("`default` must be the last clause")
            if w == "case":
                label = self.string("a route label") if label_kind == "route" else \
                    self.expression()
                self.eol()
                body = self.block(ci)
                cases.append(A.RouteCase(label, body) if label_kind == "route"
                             else A.MatchCase(label, body))
            else:
                saw_default = True
                self.eol()
                default = self.block(ci)
        return cases, default

    def _st_match(self, indent: int) -> A.Node:
        subject = self.expression()
        self.eol()
        cases, default = self._cases(indent, "match")
        return A.Match(subject, tuple(cases), default)

    def _st_route(self, indent: int) -> A.Node:
        selector = self.expression()
        self.eol()
        cases, default = self._cases(indent, "route")
        return A.Route(selector, tuple(cases), default)

    def _branches(self, indent: int, named: bool) -> tuple:
        out: list = []
        ci = self.clause_indent(indent)
        while ci is not None:
            if self.clause(ci, ("branch",)) is None:
                pk = self.peek_line()
                if pk is not None and pk[0] > indent:
                    raise self.error("expected `branch`", pk[1])
                break
            name = self.sym("the branch name") if named else None
            self.eol()
            body = self.block(ci)
            out.append(A.Branch(name, body) if named else A.FallbackBranch(body))
        return tuple(out)

    def _st_fallback(self, indent: int) -> A.Node:
        bind = self.arrow_bind()
        self.eol()
        return A.Fallback(self._branches(indent, named=False), bind)

    def _st_parallel(self, indent: int) -> A.Node:
        self.eol()
        return A.Parallel(self._branches(indent, named=True))

    def _st_race(self, indent: int) -> A.Node:
        if self.accept_word("timeout"):  # `race timeout: 5s` is accepted, never written
            self.expect(":")
        ms = self.duration()
        bind = self.arrow_bind()
        self.eol()
        return A.Race(ms, self._branches(indent, named=True), bind)

    def _option(self, allowed: tuple[str, ...], legacy: bool = True) -> Optional[str]:
        """The next header option's name, cursor on its value: canonical ``, name:`` or (when
        ``legacy``) the older space-keyword ``name`` form. None at the end of the options."""
        save = self.pos
        if self.accept(","):
            w = self.peek_word()
            if w not in allowed:
                raise self.error(f"unknown option `{w}` (expected {' or '.join(allowed)})"
                                 if w else f"expected {' or '.join(allowed)}")
            self.accept_word(w)
            self.expect(":")
            return w
        if legacy:
            w = self.peek_word()
            if w in allowed:
                self.accept_word(w)
                return w
        self.pos = save
        return None

    def _st_loop(self, indent: int) -> A.Node:
        self.expect_word("for")
        for_ms = self.duration()
        every_ms, until = 0, None
        seen: set[str] = set()
        while (w := self._option(("every", "until"))) is not None:
            if w in seen:
                raise self.error(f"`{w}` given twice")
            seen.add(w)
            if w == "every":
                every_ms = self.duration()
            else:
                until = self.expression()
        bind = self.arrow_bind()
        self.eol()
        until = self._body_until(indent, until)
        return A.Loop(for_ms, every_ms, until, self.block(indent), bind)

    def _st_timeout(self, indent: int) -> A.Node:
        ms = self.duration()
        bind = self.arrow_bind()
        self.eol()
        return A.Timeout(ms, self.block(indent), bind)

    def _st_budget(self, indent: int) -> A.Node:
        limit = self.integer("the budget limit")
        bind = self.arrow_bind()
        self.eol()
        return A.Budget(limit, self.block(indent), bind)

    def _st_with_tools(self, indent: int) -> A.Node:
        tpos = self.pos
        tools = self.json_value()
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise self.error("with_tools takes a list of tool names", tpos)
        bind = self.arrow_bind()
        self.eol()
        return A.CapScope(tuple(tools), self.block(indent), bind)

    def _st_retry(self, indent: int) -> A.Node:
        mx = self.integer("the retry count", _U32_MAX)
        backoff = delay = None
        seen: set[str] = set()
        while (w := self._option(("backoff", "delay"))) is not None:
            if w in seen:
                raise self.error(f"`{w}` given twice")
            seen.add(w)
            if w == "backoff":
                backoff = self.string() if self.at_string() else self.ident("a backoff")
            else:
                delay = self.duration()
        bind = self.arrow_bind()
        self.eol()
        return A.Retry(mx, backoff, delay, self.block(indent), bind)

    def _st_assert(self, indent: int) -> A.Node:
        cond = self.expression()
        message = self.string("the assert message") if self.accept(",") else None
        self.eol()
        return A.Assert(cond, message)

    def _st_try(self, indent: int) -> A.Node:
        self.eol()
        body = self.block(indent)
        catch, handler = None, ()
        if self.clause(indent, ("catch",)):
            if not self.at_eol():
                catch = self.sym("the error symbol")
            self.eol()
            handler = self.block(indent)
        return A.Try(body, catch, handler)

    def _st_scope(self, indent: int) -> A.Node:
        acquire = bind = None
        if not self.at_eol():
            m = _SCOPE_BIND.match(self.src, self.pos)
            if m:
                bind = m.group(1) or m.group(2)
                self.pos = m.end()
            acquire = self.expression()
        self.eol()
        body = self.block(indent)
        fin: tuple = ()
        if self.clause(indent, ("finally",)):
            self.eol()
            fin = self.block(indent)
        return A.Scope(acquire, bind, body, fin)

    def _st_saga(self, indent: int) -> A.Node:
        self.eol()
        steps: list = []
        ci = self.clause_indent(indent)
        while ci is not None:
            if self.clause(ci, ("step",)) is None:
                pk = self.peek_line()
                if pk is not None and pk[0] > indent:
                    raise self.error("expected `step` or `undo`", pk[1])
                break
            self.eol()
            body = self.block(ci)
            undo: tuple = ()
            if self.clause(ci, ("undo",)):
                self.eol()
                undo = self.block(ci)
            steps.append(A.SagaStep(body, undo))
        return A.Saga(tuple(steps))

    def _st_confirm(self, indent: int) -> A.Node:
        message = self.string("the confirm message")
        risk = None
        if self._option(("risk",)):
            risk = self.string() if self.at_string() else self.ident("a risk level")
        self.eol()
        return A.Confirm(message, risk, self.block(indent))

    def _st_throttle(self, indent: int) -> A.Node:
        name = self.string("the throttle name")
        if self.accept(","):
            self.expect_word("max")
            self.expect(":")
            mx = self.integer("the throttle max", _U32_MAX)
            self.expect(",")
            self.expect_word("per")
            self.expect(":")
        else:  # the older spelling: `throttle "api" 5 per 1m`
            mx = self.integer("the throttle max", _U32_MAX)
            self.expect_word("per")
        window = self.duration()
        self.eol()
        return A.Throttle(name, mx, window, self.block(indent))

    def _st_debounce(self, indent: int) -> A.Node:
        name = self.string("the debounce name")
        if self.accept(","):
            self.expect_word("wait")
            self.expect(":")
        wait = self.duration()  # or the older spelling `debounce "save" 300ms`
        self.eol()
        return A.Debounce(name, wait, self.block(indent))

    def _st_verify(self, indent: int) -> A.Node:
        cmd = self.expression()
        self.expect_word("contains")
        expect = self.expression()
        message = self.string("the verify message") if self.accept(":") else None
        self.eol()
        return A.Verify(cmd, expect, message)

    def _st_memo(self, indent: int) -> A.Node:
        name = self.sym("the memo symbol")
        return self._bind(name, A.Memo)

    def _st_once(self, indent: int) -> A.Node:
        label = self.string("the once label")
        bind = self.arrow_bind()
        self.eol()
        return A.Once(label, self.block(indent), bind)

    def _st_checkpoint(self, indent: int) -> A.Node:
        label = self.string("the checkpoint label")
        self.eol()
        return A.Checkpoint(label)

    def _st_await(self, indent: int) -> A.Node:
        binding = as_type = condition = None
        if not self.at_string():
            binding = self.sym("the await binding")
            if self.accept(":"):
                as_type = self.type_ref()
            self.expect("=")
        source = self.string("the await source")
        if self.accept(",") or self.peek_word() == "when":
            self.expect_word("when")
            self.accept(":")
            condition = self.expression()
        self.eol()
        return A.Await(binding, source, as_type, condition)

    def _st_return(self, indent: int) -> A.Node:
        # A bare `return` returns null (flux: `Return { value: Lit(null) }`).
        value = A.Lit(None) if self.at_eol() else self.expression()
        self.eol()
        return A.Return(value)

    def _st_do(self, indent: int) -> A.Node:
        self.sp()
        m = _OPNAME.match(self.src, self.pos)
        if not m:
            raise self.error("expected an op name after `do`")
        self.pos = m.end()
        args: list[A.Node] = []
        if not self.at_eol():
            args.append(self.expression())
            while self.accept(","):
                args.append(self.expression())
        self.eol()
        return A.Call(m.group(0), tuple(args))

    # ---------------------------------------------------------------- the flow
    def flow(self) -> A.DraftAst:
        while True:
            pk = self.peek_line()
            if pk is None:
                raise self.error("expected `flow`, found end of input")
            self.pos = pk[1]
            if self._skip_goal_line(pk[1]):
                continue
            break
        header_indent = pk[0]
        draft = self._flow_decl(header_indent)
        body = list(draft.body)
        while True:
            pk = self.peek_line()
            if pk is None:
                break
            if pk[0] == header_indent and self._skip_goal_line(pk[1]):
                body.extend(self.block(header_indent))  # a `goal "…"` line is ignored
                continue
            raise self.error("unexpected top-level line after the flow body", pk[1])
        return A.DraftAst(draft.name, draft.params, draft.returns, tuple(body))

    def _flow_decl(self, header_indent: int) -> A.DraftAst:
        """``flow [name][(params)][ -> T]`` at the cursor, and its body."""
        self.expect_word("flow")
        name = None
        params: list[A.Param] = []
        returns = None
        if not self.at_eol() and not self.peek("(") and not self.peek("->"):
            m = _DECL.match(self.src, self.pos)
            if not m:
                raise self.error(f"expected a flow name, found {self._here()}")
            name = m.group(0)
            # `flow x -> T`: a trailing `-` belongs to the arrow, not the name.
            if name.endswith("-") and self.src.startswith(">", m.end()):
                name = name[:-1]
            self.pos = m.start() + len(name)
        params = self._params()
        if self.accept("->"):
            returns = self.type_ref()
        self.eol()
        return A.DraftAst(name, tuple(params), returns, self.block(header_indent))

    def _params(self) -> list:
        params: list[A.Param] = []
        if self.accept("("):
            self.depth += 1
            while not self.accept(")"):
                self.sp()
                pm = _SIGIL_NAME.match(self.src, self.pos + (self.src[self.pos:self.pos + 1] == "$"))
                if not pm:
                    raise self.error(f"expected a parameter name, found {self._here()}")
                pname = pm.group(0)
                self.pos = pm.end()
                self.expect(":")
                params.append(A.Param(pname, self.type_ref()))
                if not self.accept(","):
                    self.expect(")", "',' or ')'")
                    break
            self.depth -= 1
        return params

    # ---------------------------------------------------------------- the module layer
    def program(self) -> "P.Module":
        """``parse_program``: a lone flow, or a :class:`~flux.lang.program.Program`."""
        prog = P.Program()
        saw_decl = last_flow = False
        while True:
            pk = self.peek_line()
            if pk is None:
                break
            if pk[0] != 0:
                raise self.error("a declaration must start at column 0", pk[1])
            if self._skip_goal_line(pk[1]):
                if last_flow and prog.flows:  # `goal` inside a flow's header block (as `parse`)
                    d = prog.flows[-1]
                    prog.flows[-1] = A.DraftAst(d.name, d.params, d.returns,
                                                d.body + self.block(0))
                continue
            self.pos = pk[1]
            word = self.word_at(pk[1])
            last_flow = word == "flow"
            if word == "flow":
                prog.flows.append(self._flow_decl(0))
                continue
            handler = getattr(self, "_decl_" + word, None) if word in _DECLS else None
            if handler is None:
                end = self.src.find("\n", pk[1])
                line = self.src[pk[1]:end if end >= 0 else self.n].strip()
                raise self.error(f"unknown top-level declaration: `{line}` (expected agent / "
                                 f"agent_loop / channel / datasource / board / trigger / journey / "
                                 f"op / permissions / flow)", pk[1])
            self.pos = pk[1] + len(word)
            handler(prog)
            saw_decl = True
        if not saw_decl and len(prog.flows) == 1:
            return prog.flows[0]
        if not saw_decl and not prog.flows:
            raise self.error("empty input: expected a `flow` header or module declarations")
        return prog

    def _decl_name(self, kind: str) -> str:
        self.sp()
        m = _DECL_NAME.match(self.src, self.pos)
        if not m:
            raise self.error(f"`{kind}` needs a name")
        self.pos = m.end()
        return m.group(0)

    def _attrs(self, parent: int, allowed: Optional[tuple] = None) -> list:
        """The ``key value`` lines of a declaration body, values read as settings."""
        out: list = []
        ci = self.clause_indent(parent)
        while ci is not None:
            line_start = self.pos
            pk = self.peek_line()
            if pk is None or pk[0] <= parent:
                self.pos = line_start
                break
            if pk[0] != ci:
                raise self.error("unexpected indentation in declaration body", pk[1])
            self.pos = pk[1]
            m = _DECL_NAME.match(self.src, self.pos)
            if not m and allowed is not None:  # e.g. `$x = …`: an op's body starts here
                self.pos = line_start
                return out
            if not m:
                raise self.error("expected a `key value` attribute")
            key = m.group(0)
            if allowed is not None and key not in allowed:
                self.pos = line_start  # the caller reads the rest (an op's body)
                return out
            self.pos = m.end()
            out.append((key, self.setting(), pk[1]))
            self.eol()
        return out

    def setting(self) -> Any:
        """A setting value: JSON scalars, ``[…]``, ``{k: v}`` records, bare words as strings and
        ``secret "NAME"`` → ``{"$secret": "NAME"}``."""
        self.sp()
        if self.pos >= self.n or self.src[self.pos] == "\n":
            raise self.error("expected a setting value")
        ch = self.src[self.pos]
        if ch == '"' or ch == "-" or ch.isdigit():
            return self.json_value()
        if ch in "[{":
            self.json_nest += 1
            if self.json_nest > MAX_JSON_DEPTH:
                raise self.error(f"a setting nests deeper than {MAX_JSON_DEPTH} levels")
            self.pos += 1
            self.depth += 1
            close = "]" if ch == "[" else "}"
            items: list = []
            record: dict = {}
            while not self.accept(close):
                if ch == "[":
                    items.append(self.setting())
                else:
                    key = self.string() if self.at_string() else self.ident("a record key")
                    self.expect(":")
                    record[key] = self.setting()
                if not self.accept(","):
                    self.expect(close, f"',' or '{close}'")
                    break
            self.depth -= 1
            self.json_nest -= 1
            return items if ch == "[" else record
        m = _DECL_NAME.match(self.src, self.pos)
        if not m or not (m.group(0)[0].isalpha() or m.group(0)[0] == "_"):
            raise self.error(f"unexpected {self._here()} in a setting value")
        word = m.group(0)
        self.pos = m.end()
        if word in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[word]
        if word == "secret":
            return {"$secret": self.string("a quoted env-var name")}
        return word

    def _str_setting(self, value: Any, what: str, pos: int) -> str:
        if not isinstance(value, str):
            raise self.error(f"`{what}` must be a string", pos)
        return value

    def _str_list(self, value: Any, what: str, pos: int) -> list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(f"`{what}` must be a list of strings", pos)
        return value

    def _permissions(self, value: Any, pos: int) -> "P.PermissionDecl":
        if not isinstance(value, dict) or set(value) - {"allow", "deny"}:
            raise self.error("`permissions` takes `allow` and `deny` lists", pos)
        allow = value.get("allow")
        return P.PermissionDecl(None if allow is None else self._str_list(allow, "allow", pos),
                                self._str_list(value.get("deny", []), "deny", pos))

    def _decl_permissions(self, prog: "P.Program") -> None:
        start = self.pos
        if prog.permissions is not None:
            raise self.error("`permissions` may be declared only once", start)
        self.eol()
        allow, deny = self._allow_deny(self._attrs(0), "permissions")
        prog.permissions = P.PermissionDecl(allow, deny)

    def _allow_deny(self, attrs: list, where: str) -> tuple:
        """``allow``/``deny`` lines of a `permissions` or `agent` body: each at most once; an absent
        ``allow`` inherits (None), an explicit ``allow []`` denies everything."""
        seen: dict = {}
        for key, value, pos in attrs:
            if key not in ("allow", "deny"):
                raise self.error(f"unknown permissions attribute `{key}`", pos)
            if key in seen:
                raise self.error(f"duplicate {where} attribute `{key}`", pos)
            seen[key] = self._str_list(value, key, pos)
        return seen.get("allow"), seen.get("deny", [])

    def _decl_agent(self, prog: "P.Program") -> None:
        decl = P.AgentDecl(self._decl_name("agent"))
        self.eol()
        settings: dict = {}
        access: list = []  # `allow [..]` / `deny [..]` lines narrow the app's permissions
        for key, value, pos in self._attrs(0):
            if key in ("allow", "deny"):
                access.append((key, value, pos))
            elif key == "model":
                decl.model = self._str_setting(value, key, pos)
            elif key in ("tools", "datasources"):
                setattr(decl, key, self._str_list(value, key, pos))
            elif key == "description":
                decl.description = self._str_setting(value, key, pos)
            elif key == "loop":
                decl.agent_loop = self._str_setting(value, key, pos)
            elif key == "permissions":
                decl.permissions = self._permissions(value, pos)
            else:
                settings[key] = value
        if access:
            if decl.permissions is not None:
                raise self.error("an `agent` takes either `permissions` or `allow`/`deny` lines",
                                 access[0][2])
            decl.permissions = P.PermissionDecl(*self._allow_deny(access, "agent"))
        decl.settings = settings or None
        prog.agents.append(decl)

    def _decl_agent_loop(self, prog: "P.Program") -> None:
        name = self._decl_name("agent_loop")
        self.eol()
        prog.agent_loops.append(P.AgentLoopDecl(name, A.DraftAst(name, (), None, self.block(0))))

    def _decl_channel(self, prog: "P.Program") -> None:
        name = self._decl_name("channel")
        self.eol()
        kind, settings = name, {}
        for key, value, pos in self._attrs(0):
            if key == "kind":
                kind = self._str_setting(value, key, pos)
            else:
                settings[key] = value
        prog.channels.append(P.ChannelDecl(name, kind, settings or None))

    def _decl_datasource(self, prog: "P.Program") -> None:
        name = self._decl_name("datasource")
        self.eol()
        decl = P.DatasourceDecl(name, name)
        settings: dict = {}
        for key, value, pos in self._attrs(0):
            if key == "kind":
                decl.kind = self._str_setting(value, key, pos)
            elif key == "path":
                decl.path = self._str_setting(value, key, pos)
            else:
                settings[key] = value
        decl.settings = settings or None
        prog.datasources.append(decl)

    def _decl_board(self, prog: "P.Program") -> None:
        name = self._decl_name("board")
        start = self.pos
        self.eol()
        got: dict = {}
        for key, value, pos in self._attrs(0):
            if key not in ("scope", "profile", "kind", "root"):
                raise self.error(f"unknown board attribute `{key}` (expected scope, profile, kind or "
                                 f"root)", pos)
            if key in got:
                raise self.error(f"duplicate board attribute `{key}`", pos)
            got[key] = self._str_setting(value, key, pos)
        for key, allowed in (("scope", P.BoardDecl.SCOPES), ("profile", P.BoardDecl.PROFILES),
                             ("kind", P.BoardDecl.KINDS)):
            if key not in got:
                raise self.error(f"board `{name}` needs a `{key}` ({' / '.join(allowed)})", start)
            if got[key] not in allowed:
                raise self.error(f"unknown board {key} `{got[key]}` (expected {' / '.join(allowed)})",
                                 start)
        if any(b.name == name for b in prog.boards):
            raise self.error(f"board `{name}` is declared twice", start)
        prog.boards.append(P.BoardDecl(name, got["scope"], got["profile"], got["kind"], got.get("root")))

    def _decl_trigger(self, prog: "P.Program") -> None:
        name = self._decl_name("trigger")
        start = self.pos
        self.eol()
        got: dict = {}
        for key, value, pos in self._attrs(0):
            if key not in ("on", "run", "agent"):
                raise self.error(f"unknown trigger attribute `{key}`", pos)
            got[key] = self._str_setting(value, key, pos)
        if "on" not in got:
            raise self.error("a `trigger` needs an `on` event label", start)
        if "run" not in got and "agent" not in got:
            raise self.error("a `trigger` needs a `run` journey/flow name or an `agent`", start)
        prog.triggers.append(P.TriggerDecl(name, got["on"], got.get("run", ""), got.get("agent")))

    def _decl_journey(self, prog: "P.Program") -> None:
        name = self._decl_name("journey")
        start = self.pos
        self.eol()
        agent, flow = None, None
        ci = self.clause_indent(0)
        while ci is not None:
            pk = self.peek_line()
            if pk is None or pk[0] == 0:
                break
            if pk[0] != ci:
                raise self.error(f"unexpected indentation in journey `{name}`", pk[1])
            self.pos = pk[1]
            if self.accept_word("agent"):
                agent = self._str_setting(self.setting(), "agent", pk[1])
                self.eol()
            elif self.word_at(pk[1]) == "flow":
                flow = self._flow_decl(ci)
                if flow.name is None:
                    flow = A.DraftAst(name, flow.params, flow.returns, flow.body)
            else:
                raise self.error(f"unexpected line in journey `{name}`", pk[1])
        if flow is None:
            raise self.error(f"journey `{name}` needs a `flow` body", start)
        prog.journeys.append(P.JourneyDecl(name, flow, agent))

    def _decl_op(self, prog: "P.Program") -> None:
        name = self._decl_name("op")
        params = self._params()
        returns = self.type_ref() if self.accept("->") else None
        self.eol()
        meta = P.CompositeOpMeta()
        for key, value, pos in self._attrs(0, _OP_META):
            if key in ("description", "view"):
                setattr(meta, key, self._str_setting(value, key, pos))
            elif key == "risk":
                meta.risk = self._token(value, key, pos, ("low", "medium", "high", "destructive"))
            elif key == "idempotency":
                meta.idempotency = self._token(value, key, pos,
                                               ("idempotent", "non_idempotent", "conditional"))
            elif key == "effects":
                effects = []
                for item in self._str_list(value, key, pos):
                    e = self._token(item, "effect", pos, _OP_EFFECTS)
                    e = "network" if e == "model" else "filesystem" if e == "file_system" else e
                    if e not in effects:
                        effects.append(e)
                meta.effects = effects
            elif key == "expose":
                if not isinstance(value, bool):
                    raise self.error("`expose` must be a boolean", pos)
                meta.expose = value
            elif key == "limits":
                if not isinstance(value, dict):
                    raise self.error("`limits` must be an object", pos)
                for lk, lv in value.items():
                    if lk not in ("dispatches", "timeout_ms", "context_chars", "max_depth"):
                        raise self.error(f"unknown limit `{lk}`", pos)
                    if isinstance(lv, bool) or not isinstance(lv, int) or lv < 0:
                        raise self.error(f"limit `{lk}` must be a positive integer", pos)
                meta.limits = dict(value)
        body = A.DraftAst(name, tuple(params), returns, self.block(0))
        prog.ops.append(P.CompositeOpDecl(name, tuple(params), returns, meta, body))

    def _token(self, value: Any, what: str, pos: int, allowed: tuple) -> str:
        tok = value.strip().lower().replace("-", "_") if isinstance(value, str) else None
        if tok not in allowed:
            raise self.error(f"unknown {what} `{value}`", pos)
        return tok

    def _skip_goal_line(self, pos: int) -> bool:
        """Consume a ``goal …`` line starting at ``pos`` (flux ignores it: no AST slot)."""
        self.pos = pos
        if not self.accept_word("goal"):
            return False
        if self.at_string():
            self.string("the goal text")
        end = self.src.find("\n", self.pos)
        self.pos = self.n if end < 0 else end + 1
        return True


_SCOPE_BIND = re.compile(r"(?:\$([A-Za-z0-9_]+)|([A-Za-z_][A-Za-z0-9_]*))[ \t]*=(?!=)")
_DECLS = ("agent", "agent_loop", "channel", "datasource", "board", "trigger", "journey", "op",
          "permissions")
_DECL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
_OP_META = ("description", "risk", "idempotency", "effects", "limits", "expose", "view")
_OP_EFFECTS = ("read", "write", "network", "model", "process", "browser", "filesystem",
               "file_system", "local_system")

# The shape of nearly every stored plan: a host-derived one-statement flow (spec §5.2),
# ``flow\n  name = op({<JSON object>})\n``. Recognised here without the general parser.
_HOST_PLAN = re.compile(r"flow\n  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{.*\})\)\n?", re.S)


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


def _no_duplicate_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _reject_constant(name: str):
    raise ValueError(name)


def _host_plan_fast(text: str) -> A.DraftAst | None:
    m = _HOST_PLAN.fullmatch(text)
    if m is None:
        return None
    bind = _host_bind(*m.groups())
    if bind is None:
        return None
    return A.DraftAst(None, (), None, (bind,))


# One statement line of a multi-statement host plan: ``  name = op({<JSON object>})`` (no line break
# inside: compact JSON writes none, and anything else is left to the general parser).
_HOST_LINE = re.compile(r"  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{.*\})\)")


def _host_plans_fast(text: str) -> A.DraftAst | None:
    """A plan of several host statements, one a line (``flow\n  a = op({…})\n  b = op({…})\n``: how a
    resumable turn's plans are stored), without the general parser; None for anything else. Each
    statement is read as :func:`_host_plan_fast` reads the one of a host plan (tests/core/
    test_parse_fastpath.py compares the result with the general parser's)."""
    if not text.startswith("flow\n  "):
        return None
    lines = text[5:-1 if text.endswith("\n") else None].split("\n")
    body = []
    for line in lines:
        m = _HOST_LINE.fullmatch(line)
        if m is None:
            return None
        bind = _host_bind(*m.groups())
        if bind is None:
            return None
        body.append(bind)
    return A.DraftAst(None, (), None, tuple(body))


def _host_bind(sigil: str, name: str, op: str, arg: str) -> "A.Bind | None":
    """The statement ``name = op(<arg>)`` of a host plan, or None when the general parser must read it."""
    if '"""' in arg or "\r" in arg or (not sigil and name in RESERVED) or op in RESERVED or op == "fmt":
        return None  # (a bare CR is JSON whitespace to json.loads and an error to the general parser)
    try:
        value = json.loads(arg, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant,
                           parse_int=_json_number, parse_float=_json_number)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or (
            arg.count("[") + arg.count("{") > MAX_JSON_DEPTH and
            _json_depth_over(value, MAX_JSON_DEPTH)):
        return None
    if "\\u" in arg:
        # `\ud83d` escapes decode to unpaired surrogates: the one rule replaces them.
        value = scrub_value(value)
    return A.Bind(name, A.Call(op, (A.Lit(value),)))


def _json_depth_over(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests deeper than ``limit`` containers (iterative)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        if d > limit:
            return True
        stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return False


def parse(text: str) -> A.DraftAst:
    """Parse one flow. Raises :class:`ParseError` (``line N, col M: …``) and nothing else."""
    text = scrub_text(text)
    fast = _host_plan_fast(text)
    if fast is None:
        fast = _host_plans_fast(text)
    if fast is not None:
        return fast
    return _Parser(text).flow()


def parse_program(text: str) -> "P.Module":
    """Parse a ``.flux`` module: a lone flow (a DraftAst) or a :class:`~flux.lang.program.Program`.

    Raises :class:`ParseError` and nothing else."""
    return _Parser(text).program()


def parse_expression(text: str, formula: bool = False) -> A.Node:
    """Parse one inline expression (the formatter uses it to verify native spellings).

    ``formula=True`` reads an ``expr`` formula as stored (bare names, no call-argument puns).
    """
    p = _Parser(text)
    p.no_puns = formula
    node = p.expression()
    p.sp()
    if p.pos != p.n:
        raise p.error(f"unexpected {p._here()} after the expression")
    return node


def formula_tree(formula: str) -> Any:
    """The operator tree of a stored ``expr`` formula, for the interpreter to evaluate.

    Leaves are ``Var``/``Lit``/``Jq`` nodes; inner nodes are objects with ``op`` (``"+"``,
    ``"&&"``, ``"!"``, ``"neg"``, or a function name) and ``args``.
    """
    p = _Parser(formula)
    p.no_puns = True
    p.formula_leaves = True
    tree = p._binary(1)
    if isinstance(tree, _F) and tree.op == "'":
        tree = tree.args[0]
    p.sp()
    if p.pos != p.n:
        raise p.error(f"unexpected {p._here()} in formula")
    return tree
