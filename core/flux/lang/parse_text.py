"""The cursor every Flux-Lang parsing rule stands on: :class:`ParseError`, the language's word sets and
limits, and :class:`TextCursor` — blanks and comments, words, symbols, numbers, durations, strings, JSON
values and types over the source text."""

from __future__ import annotations

import json
import re
from typing import Any, Optional, Union

from flux.canonical import scrub_text
from flux.errors import FluxError

from . import ast as A
from .astjson import AstJsonError, node_from_json

__all__ = ["ParseError", "TextCursor", "RESERVED", "STATEMENT_KEYWORDS", "CLAUSE_WORDS", "VALUE_WORDS",
           "FORMULA_FUNCTIONS", "MAX_NESTING", "MAX_JSON_DEPTH", "IDENT", "OPNAME", "json_number"]

#: How deeply blocks, templates, calls, parentheses and operator formulas may nest. Real plans stay
#: far below it; the limit keeps every later recursive walk (formatter, AST JSON, hashes,
#: interpreter) well inside Python's stack.
MAX_NESTING = 64
#: How deeply a JSON literal may nest: serde_json's own recursion limit, so flux reads the same.
MAX_JSON_DEPTH = 128
U64_MAX = 2 ** 64 - 1
U32_MAX = 2 ** 32 - 1


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

#: a bare symbol's name (``.match`` reads one at a position, ``.fullmatch`` tests a whole text)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: an op's name: an identifier that may also hold ``.`` and ``-`` (``fs.read``, ``git-log``)
OPNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
DECL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
TYPENAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")
#: a `$`-spelled symbol may start with a digit (flux: `$9arg`); a bare one may not
SIGIL_NAME = re.compile(r"[A-Za-z0-9_]+")
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
INT = re.compile(r"[0-9]+")
#: blanks, then a bracket opening a string key or an index (``x ["k"]``, ``x [0]``)
BRACKET_AFTER_GAP = re.compile(r"[ \t]+(?=\[[ \t]*[\"0-9])")


def json_number(text: str) -> Union[int, float]:
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


class TextCursor:
    """The parser's position in the source and the rules every construct shares: blanks and
    comments, words, symbols, numbers, durations, strings, JSON values and types."""

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
        #: position -> text of every comment passed over, when the caller asks (the lossless formatter)
        self.comments: Optional[dict] = None

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
                if self.comments is not None:
                    self.comments[self.pos] = src[self.pos:n if end < 0 else end]
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
        m = IDENT.match(self.src, pos)
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
        m = IDENT.match(self.src, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self._here()}")
        self.pos = m.end()
        return m.group(0)

    def sym(self, what: str = "a symbol") -> str:
        """A symbol, spelled ``$name`` or bare ``name``."""
        self.sp()
        if self.pos < self.n and self.src[self.pos] == "$":
            self.pos += 1
            m = SIGIL_NAME.match(self.src, self.pos)
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

    def integer(self, what: str = "a whole number", most: int = U64_MAX) -> int:
        self.sp()
        m = INT.match(self.src, self.pos)
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
                    if v * mult > U64_MAX:
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
        m = NUMBER.match(self.src, self.pos)
        if m and m.end() > self.pos:
            try:
                value = json_number(m.group(0))
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
            # Trailing commas are accepted: delimited values may span lines.
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
        m = TYPENAME.match(self.src, self.pos)
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
