"""The canonical Flux-Lang text of a :class:`~flux.lang.ast.DraftAst`: what ``plan_attempted``
stores and ``plan.flux.snap`` compares byte for byte, with ``@json`` for what has no native
spelling. Its rules are in docs/flux-lang.md, "How the language layer is built".
"""

from __future__ import annotations

import contextlib
import json
import re
from contextvars import ContextVar
from json.encoder import encode_basestring as _json_str  # C: json_string's text (tested equal)
from typing import Any, Callable, Iterable, Optional

from flux.canonical import compact_json, format_float, json_string, scrub_text
from flux.errors import FluxError

from . import ast as A
from .astjson import node_json_text
from .parse_text import IDENT, OPNAME
from .parser import RESERVED, STATEMENT_KEYWORDS, VALUE_WORDS, ParseError, parse_expression

__all__ = ["FormatError", "format_flow", "format_statement", "format_node_lines", "format_duration",
           "compact_value", "is_identifier", "format_bind_call", "format_header", "write_statement", "LineWriter",
           "author_spelling"]

_TYPENAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_PATH_SEGMENT = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\.([0-9]+)|\.?\[("(?:[^"\\\n]|\\.)*")\]')
_INDENT = "  "


class FormatError(FluxError):
    """An AST the formatter cannot write (one built in code that nests too deeply)."""


def is_identifier(name: Any) -> bool:
    return isinstance(name, str) and bool(IDENT.fullmatch(name))


_DIGIT_LED = re.compile(r"[0-9][A-Za-z0-9_]*\Z")


def is_symbol(name: Any) -> bool:
    """A symbol the text can spell: an identifier, or a digit-led name written ``$9arg``."""
    return is_identifier(name) or (isinstance(name, str) and bool(_DIGIT_LED.match(name)))


def _sym(name: str) -> str:
    """A symbol as written: bare, or ``$name`` for reserved words and digit-led names."""
    return "$" + name if name in RESERVED or not is_identifier(name) else name


#: Set while the lossless formatter writes (:func:`author_spelling`): a symbol in expression position
#: is bare unless it is a value word, and an op that is a reserved word but starts no statement is
#: called as ``op(…)`` — the spellings an author's canonical file keeps (``branch: branch``,
#: ``step()``), which read back the same.
_AUTHOR_SPELLING: ContextVar[bool] = ContextVar("author_spelling", default=False)
#: ops no call spelling can name (the parser reads `fmt(`, `parse(`, `expr("…"` as their own forms)
_CALL_FORMS = frozenset({"fmt", "parse", "expr"})


@contextlib.contextmanager
def author_spelling():
    """Write with the lossless formatter's spellings (see :data:`_AUTHOR_SPELLING`) inside the block."""
    token = _AUTHOR_SPELLING.set(True)
    try:
        yield
    finally:
        _AUTHOR_SPELLING.reset(token)


def _expr_sym(name: str) -> str:
    """A symbol in expression position: as :func:`_sym` writes it, or bare when the author's spelling
    is asked for and a bare word reads back as the symbol."""
    if _AUTHOR_SPELLING.get() and is_identifier(name) and name not in VALUE_WORDS:
        return name
    return _sym(name)


def _do_form(op: str) -> bool:
    """Whether a call statement to ``op`` is written ``do op …`` (flux: for a reserved op name)."""
    if _AUTHOR_SPELLING.get():
        return op in STATEMENT_KEYWORDS or op in _CALL_FORMS or op in ("until", "goal")
    return op in RESERVED


def _syms_ok(*names: Optional[str]) -> bool:
    return all(n is None or is_symbol(n) for n in names)


def format_duration(ms: int) -> str:
    """``Nm`` for whole minutes, ``Ns`` for whole seconds, else ``Nms``."""
    if ms % 60000 == 0:
        return f"{ms // 60000}m"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


def _str(s: str) -> str:
    """A string leaf: ``\"\"\"…\"\"\"`` when it has a newline and is safe to spell verbatim."""
    if "\n" in s and '"""' not in s and not s.endswith('"') and "\r" not in s:
        return f'"""{s}"""'
    return _json_str(s)


def compact_value(v: Any) -> str:
    """A JSON literal as ``compact_value`` writes it: sorted keys, ``\"\"\"`` string leaves."""
    t = type(v)
    if t is str:
        return _json_str(v) if "\n" not in v else _str(v)
    if t is dict and _ascii_keys(v):
        # the commonest literal (an op's input object): its str leaves written in place, without a
        # call each — the same text as the general arm below
        parts = []
        for k in sorted(v):
            x = v[k]
            parts.append(_json_str(k) + ":" + (_json_str(x) if type(x) is str and "\n" not in x else compact_value(x)))
        return "{" + ",".join(parts) + "}"
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, dict):
        keys = sorted(v) if _ascii_keys(v) else sorted(v, key=A.utf8_key)
        return "{" + ",".join(json_string(k) + ":" + compact_value(v[k]) for k in keys) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(compact_value(x) for x in v) + "]"
    if isinstance(v, float) and not isinstance(v, bool):
        return format_float(v)
    return compact_json(v)


def _ascii_keys(d: dict) -> bool:
    """Every key a ``str`` of ASCII only: then code-point order (``sorted``) is the UTF-8 byte
    order :func:`~flux.lang.ast.utf8_key` sorts by (the keys of a dict are distinct, so no ties)."""
    try:
        return "".join(d).isascii()
    except TypeError:  # a key that is no str: utf8_key's own path (and its error)
        return False


def _type_ok(t: Optional[A.TypeRef]) -> bool:
    """Whether a type label re-parses to the same TypeRef."""
    if t is None or t.tag in A.TypeRef.BUILTINS:
        return True
    if t.tag == "list":
        return _type_ok(t.inner)
    name = t.name or ""
    return bool(_TYPENAME.match(name)) and name.lower() not in A.TypeRef.BUILTINS and \
        name.lower() != "list"


def _json_escape(node: A.Node) -> str:
    return "@json " + node_json_text(node)


def _is_dynamic(node: A.Node) -> bool:
    if isinstance(node, A.Lit):
        return False
    if isinstance(node, A.Obj):
        return any(_is_dynamic(v) for _, v in node.fields)
    if isinstance(node, A.ListExpr):
        return any(_is_dynamic(v) for v in node.items)
    return True


def _op_inline_ok(op: str) -> bool:
    if not OPNAME.fullmatch(op):
        return False
    return op not in RESERVED or (_AUTHOR_SPELLING.get() and op not in _CALL_FORMS)


def _pun(key: str, value: A.Node) -> bool:
    """``{ key }`` for ``{ key: key }``: the value is the symbol of the same, bare-spellable name."""
    return isinstance(value, A.Var) and value.name == key and is_identifier(key) and \
        key not in RESERVED


def _punned(obj: A.Obj, key: str, value: A.Node, default: bool) -> bool:
    """Whether field ``key`` is written alone: as the author wrote it when the author's spelling is
    asked for and known (an object from the lossless formatter's parse), else ``default``."""
    if _AUTHOR_SPELLING.get():
        puns = getattr(obj, "author_puns", None)
        if puns is not None:
            return key in puns and _pun(key, value)
    return default


def _call_args(args: tuple) -> Optional[str]:
    """flux's fmt_call_args; None when a single object argument has a key that is no label (the
    call then has no native spelling)."""
    if len(args) == 1 and isinstance(args[0], A.Obj) and args[0].fields:
        fields = args[0].fields
        if not all(is_identifier(k) for k, _ in fields):  # flux's is_ident_key
            return None
        obj = args[0]
        return ", ".join(k if _punned(obj, k, v, len(fields) >= 2 and _pun(k, v)) else f"{k}: {expr(v)}"
                         for k, v in fields)
    if len(args) >= 2 and all(isinstance(a, A.Var) and is_symbol(a.name) for a in args):
        return ", ".join("$" + a.name for a in args)
    return ", ".join(expr(a) for a in args)


def _formula_with_sigils(formula: str, names: set[str]) -> str:
    """Re-insert ``$`` before every formula identifier that names a var (not inside strings)."""
    out, i, n = [], 0, len(formula)
    while i < n:
        ch = formula[i]
        if ch == '"':
            j = i + 1
            while j < n and formula[j] != '"':
                j += 2 if formula[j] == "\\" else 1
            out.append(formula[i:j + 1])
            i = j + 1
            continue
        if ch == "'":
            j = formula.find("'", i + 1)
            j = n - 1 if j < 0 else j
            out.append(formula[i:j + 1])
            i = j + 1
            continue
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(formula, i)
        if m:
            word = m.group(0)
            prev = formula[i - 1] if i else ""
            nxt = formula[m.end()] if m.end() < n else ""
            if word in names and prev != "." and prev != "$" and nxt != ".":
                out.append("$" + word)
            else:
                out.append(word)
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def expr(node: A.Node) -> str:
    """A node in inline (expression) position; ``@json`` when it has no native spelling."""
    if isinstance(node, A.Var):
        return _expr_sym(node.name) if is_symbol(node.name) else _json_escape(node)
    if isinstance(node, A.Lit):
        return compact_value(node.value)
    if isinstance(node, A.Call):
        args = _call_args(node.args) if _op_inline_ok(node.op) else None
        return f"{node.op}({args})" if args is not None else _json_escape(node)
    if isinstance(node, A.Fmt):
        return f"fmt({_str(node.template)})"
    if isinstance(node, A.Jq):
        native = native_path(node.path)
        if isinstance(node.input, A.Var) and is_symbol(node.input.name) and native:
            return _expr_sym(node.input.name) + native + ("?" if node.optional else "")
        return _json_escape(node)
    if isinstance(node, A.Obj) and _is_dynamic(node):
        parts = [k if _punned(node, k, v, _pun(k, v)) else f"{k if is_identifier(k) else json_string(k)}: {expr(v)}"
                 for k, v in node.fields]
        return "{ " + ", ".join(parts) + " }"
    if isinstance(node, A.ListExpr) and _is_dynamic(node):
        return "[ " + ", ".join(expr(v) for v in node.items) + " ]"
    if isinstance(node, A.Expr):
        names = {k for k, _ in node.vars}
        if all(isinstance(v, A.Var) and v.name == k for k, v in node.vars):
            text = _formula_with_sigils(node.formula, names)
            try:
                if parse_expression(text) == node:
                    return text
            except ParseError:
                pass
        return _json_escape(node)
    if isinstance(node, A.Peek) and is_symbol(node.name):
        return "peek " + _sym(node.name)
    if isinstance(node, A.Parse):  # flux: native unless the value itself needs `@json`
        value = expr(node.value)
        if value.startswith("@json "):
            return _json_escape(node)
        return f"parse({value}, as: {_str(node.as_type)})"
    if isinstance(node, A.Thing):  # flux's spelling: `thing custom "<kind>" …` for a custom kind
        t = node.thing
        if (t.custom or t.kind in A.ThingRef.KINDS) and t.selector in A.ThingRef.SELECTORS:
            kind = f"custom {_str(t.kind)}" if t.custom else t.kind
            return f"thing {kind} {t.selector} {_str(t.value)}"
        return _json_escape(node)
    return _json_escape(node)


def native_path(path: str) -> Optional[str]:
    """The source spelling of a canonical jq path (flux's ``native_field_path``): ``.a.0["k"]``
    is written ``.a[0]["k"]``; None for a path that would not read back to the same string."""
    out, pos, first = [], 0, True
    while pos < len(path):
        m = _PATH_SEGMENT.match(path, pos)
        if m is None:
            return None
        if m.group(1) is not None:
            out.append("." + m.group(1))
        elif m.group(2) is not None:
            digits = m.group(2)
            if len(digits) > 1 and digits[0] == "0":
                return None
            out.append(f"[{digits}]")
        else:
            # a key in brackets: leading `.` exactly when it is the first segment
            if path[m.start()] == "." if not first else path[m.start()] != ".":
                return None
            try:
                key = json.loads(m.group(3))
            except ValueError:
                return None
            if json_string(key) != m.group(3):
                return None
            out.append(f"[{m.group(3)}]")
        first = False
        pos = m.end()
    return "".join(out) or None


def _arrow(bind: Optional[str]) -> str:
    return f" -> {_sym(bind)}" if bind is not None else ""


class LineWriter:
    """The lines of a formatted flow; :meth:`body` writes a block of statements (a subclass may
    put more around them: the lossless formatter's comments)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, level: int, text: str) -> None:
        self.lines.append(_INDENT * level + text + "\n")

    def body(self, nodes: tuple, level: int) -> None:
        pad = _INDENT * level
        add = self.lines.append
        for n in nodes:
            line = _bind_call_stmt(n)  # the commonest statement, without write_statement's dispatch
            if line is not None:
                add(pad + line + "\n")
            else:
                write_statement(n, level, self)


def _call_like(node: A.Node) -> bool:
    """A `verify` operand flux spells natively: not a formula, and not itself an `@json` escape."""
    return not isinstance(node, A.Expr) and not expr(node).startswith("@json ")


def write_statement(node: A.Node, level: int, out: LineWriter) -> None:
    """Write one statement (and its nested blocks) at ``level``: its kind's writer, or ``@json`` when the
    kind has no native spelling or the writer finds a part that cannot be spelled natively."""
    line = _bind_call_stmt(node)
    if line is not None:
        out.line(level, line)
        return
    writer = _STATEMENT_WRITERS.get(type(node))
    if writer is None or not writer(node, level, out):
        # Any other expression standing as a statement (peek, fmt, field access, thing, parse,
        # templates, formulas) has no statement marker in flux's formatter either.
        out.line(level, _json_escape(node))


# Each writer below writes one statement kind and returns True, or returns False having written
# nothing when a part of the node has no native spelling (the statement is then `@json`).

def _w_bind(node: A.Node, level: int, out: LineWriter) -> bool:
    if not (is_symbol(node.name) and _type_ok(node.ty)):
        return False
    if node.effect is not None:
        out.line(level, f"@effect({node.effect})")
    head = ("memo " if isinstance(node, A.Memo) else "") + _sym(node.name)
    ty = f": {node.ty.label()}" if node.ty is not None else ""
    out.line(level, f"{head}{ty} = {expr(node.value)}")
    return True


def _w_ctx_append(node: A.CtxAppend, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.ctx, *node.add):
        return False
    tail = (" " + ", ".join(_sym(s) for s in node.add)) if node.add else ""
    out.line(level, f"{_sym(node.ctx)} +={tail}")
    return True


def _w_call(node: A.Call, level: int, out: LineWriter) -> bool:
    if not OPNAME.fullmatch(node.op):
        return False
    if _do_form(node.op):  # flux's fmt_legacy_call_args: `$` on symbols, no `@json` arg
        parts = ["$" + a.name if isinstance(a, A.Var) and is_identifier(a.name) else expr(a)
                 for a in node.args]
        if any(p.startswith("@json ") for p in parts):
            return False
        out.line(level, f"do {node.op}" + (" " + ", ".join(parts) if parts else ""))
        return True
    args = _call_args(node.args)
    if args is None:
        return False
    out.line(level, f"{node.op}({args})")
    return True


def _w_return(node: A.Return, level: int, out: LineWriter) -> bool:
    out.line(level, "return " + expr(node.value))
    return True


def _w_var(node: A.Var, level: int, out: LineWriter) -> bool:
    if not is_symbol(node.name):
        return False
    out.line(level, _sym(node.name))
    return True


def _w_lit(node: A.Lit, level: int, out: LineWriter) -> bool:
    out.line(level, compact_value(node.value))
    return True


def _head_and_body(out: LineWriter, level: int, head: str, body: tuple, clause: str = "", clause_body: tuple = ()) -> None:
    """``head`` with its body one level in; then ``clause`` with its own body when that body has statements
    (``when … else``, ``scope … finally``, a saga's ``step … undo``)."""
    out.line(level, head)
    out.body(body, level + 1)
    if clause_body:
        out.line(level, clause)
        out.body(clause_body, level + 1)


def _w_when(node: A.When, level: int, out: LineWriter) -> bool:
    _head_and_body(out, level, "when " + expr(node.cond), node.then, "else", node.otherwise)
    return True


def _w_each(node: A.Each, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.item, node.collect) or (node.flat and node.collect is None):
        return False
    tail = ""
    if node.collect is not None:
        tail = " -> " + ("flat " if node.flat else "") + _sym(node.collect)
    _head_and_body(out, level, f"each {_sym(node.item)} in {expr(node.source)}{tail}", node.body)
    return True


def _w_pipe(node: A.Pipe, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.bind):
        return False
    _head_and_body(out, level, "pipe" + _arrow(node.bind), node.steps)
    return True


def _w_ctx(node: A.Ctx, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.name, *node.include, *node.exclude):
        return False
    out.line(level, "ctx " + _sym(node.name))
    if node.purpose is not None:
        out.line(level + 1, "purpose " + _str(node.purpose))
    if node.budget is not None:
        out.line(level + 1, f"budget {node.budget}")
    if node.include:
        out.line(level + 1, "include " + ", ".join(_sym(s) for s in node.include))
    if node.exclude:
        out.line(level + 1, "exclude " + ", ".join(_sym(s) for s in node.exclude))
    return True


def _w_match(node: A.Match, level: int, out: LineWriter) -> bool:
    out.line(level, "match " + expr(node.subject))
    _cases_and_default(((expr(c.value), c.body) for c in node.cases), node.default, level, out)
    return True


def _w_route(node: A.Route, level: int, out: LineWriter) -> bool:
    out.line(level, "route " + expr(node.selector))
    _cases_and_default(((_str(c.label), c.body) for c in node.cases), node.default, level, out)
    return True


def _cases_and_default(cases: Iterable[tuple[str, tuple]], default: tuple, level: int, out: LineWriter) -> None:
    """A ``match``/``route`` block: each ``case <spelled>`` with its body, then ``default`` when it has one."""
    for spelled, body in cases:
        out.line(level + 1, "case " + spelled)
        out.body(body, level + 2)
    if default:
        out.line(level + 1, "default")
        out.body(default, level + 2)


def _w_fallback(node: A.Fallback, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.bind):
        return False
    out.line(level, "fallback" + _arrow(node.bind))
    for b in node.branches:
        out.line(level + 1, "branch")
        out.body(b.body, level + 2)
    return True


def _w_block(node: A.Node, level: int, out: LineWriter) -> bool:
    """A block statement of :data:`_BLOCK_HEADERS`: its header line (``-> name`` after it when the block
    binds its value: ``repeat``'s collect, the others' bind), then its body."""
    bind = node.collect if type(node) is A.Repeat else getattr(node, "bind", None)
    if not _syms_ok(bind):
        return False
    header = _BLOCK_HEADERS[type(node)](node)
    if header is None:
        return False
    _head_and_body(out, level, header + _arrow(bind), node.body)
    return True


def _repeat_header(node: A.Repeat) -> str:
    return f"repeat {node.max}" + (f", until: {expr(node.until)}" if node.until is not None else "")


def _loop_header(node: A.Loop) -> str:
    until = f", until: {expr(node.until)}" if node.until is not None else ""
    return f"loop for {format_duration(node.for_ms)}, every: {format_duration(node.every_ms)}{until}"


def _retry_header(node: A.Retry) -> Optional[str]:
    if not _plain_word(node.backoff):
        return None
    backoff = f", backoff: {node.backoff}" if node.backoff is not None else ""
    delay = f", delay: {format_duration(node.delay_ms)}" if node.delay_ms is not None else ""
    return f"retry {node.max}{backoff}{delay}"


def _confirm_header(node: A.Confirm) -> Optional[str]:
    if not _plain_word(node.risk):
        return None
    return f"confirm {_str(node.message)}" + (f", risk: {node.risk}" if node.risk is not None else "")


#: The header line of each block statement :func:`_w_block` writes (None: a part has no native spelling).
_BLOCK_HEADERS: dict[type, Callable[[Any], Optional[str]]] = {
    A.Unless: lambda node: "unless " + expr(node.cond),
    A.Seq: lambda node: "seq",
    A.Repeat: _repeat_header,
    A.Loop: _loop_header,
    A.Timeout: lambda node: f"timeout {format_duration(node.ms)}",
    A.Budget: lambda node: f"budget {node.limit}",
    A.CapScope: lambda node: f"with_tools {compact_json(list(node.tools))}",
    A.Retry: _retry_header,
    A.Confirm: _confirm_header,
    A.Throttle: lambda node: f"throttle {_str(node.name)}, max: {node.max}, per: {format_duration(node.window_ms)}",
    A.Debounce: lambda node: f"debounce {_str(node.name)}, wait: {format_duration(node.wait_ms)}",
    A.Once: lambda node: f"once {_str(node.label)}",
}


def _named_branches(branches: tuple, level: int, out: LineWriter) -> None:
    for b in branches:
        out.line(level + 1, "branch " + _sym(b.name))
        out.body(b.body, level + 2)


def _w_parallel(node: A.Parallel, level: int, out: LineWriter) -> bool:
    if not _syms_ok(*(b.name for b in node.branches)):
        return False
    out.line(level, "parallel")
    _named_branches(node.branches, level, out)
    return True


def _w_race(node: A.Race, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.bind, *(b.name for b in node.branches)):
        return False
    out.line(level, f"race {format_duration(node.timeout_ms)}{_arrow(node.bind)}")
    _named_branches(node.branches, level, out)
    return True


def _plain_word(value: Optional[str]) -> bool:
    """A ``backoff``/``risk`` value written bare: one word that is not reserved."""
    return value is None or (bool(IDENT.fullmatch(value)) and value not in RESERVED)


def _w_assert(node: A.Assert, level: int, out: LineWriter) -> bool:
    msg = f", {_str(node.message)}" if node.message is not None else ""
    out.line(level, f"assert {expr(node.cond)}{msg}")
    return True


def _w_try(node: A.Try, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.catch):
        return False
    out.line(level, "try")
    out.body(node.body, level + 1)
    out.line(level, "catch" + (" " + _sym(node.catch) if node.catch is not None else ""))
    out.body(node.handler, level + 1)
    return True


def _w_scope(node: A.Scope, level: int, out: LineWriter) -> bool:
    if not _syms_ok(node.bind) or (node.bind is None) != (node.acquire is None):
        return False
    head = "scope"
    if node.acquire is not None:
        acquire = expr(node.acquire)
        if acquire.startswith("@json "):
            return False
        head += " " + (f"{_sym(node.bind)} = " if node.bind is not None else "") + acquire
    _head_and_body(out, level, head, node.body, "finally", node.finally_)
    return True


def _w_saga(node: A.Saga, level: int, out: LineWriter) -> bool:
    out.line(level, "saga")
    for s in node.steps:
        _head_and_body(out, level + 1, "step", s.body, "undo", s.undo)
    return True


def _w_verify(node: A.Verify, level: int, out: LineWriter) -> bool:
    if not (_call_like(node.cmd) and _call_like(node.expect)):
        return False
    msg = f": {_str(node.message)}" if node.message is not None else ""
    out.line(level, f"verify {expr(node.cmd)} contains {expr(node.expect)}{msg}")
    return True


def _w_checkpoint(node: A.Checkpoint, level: int, out: LineWriter) -> bool:
    out.line(level, f"checkpoint {_str(node.label)}")
    return True


def _w_await(node: A.Await, level: int, out: LineWriter) -> bool:
    if not (_syms_ok(node.binding) and _type_ok(node.as_type)) or \
            (node.as_type is not None and node.binding is None):
        return False
    head = "await "
    if node.binding is not None:
        ty = f": {node.as_type.label()}" if node.as_type is not None else ""
        head += f"{_sym(node.binding)}{ty} = "
    head += _str(node.source)
    if node.condition is not None:
        head += f", when: {expr(node.condition)}"
    out.line(level, head)
    return True


#: statement kind → its writer (one per kind; a kind missing here is always `@json`)
_STATEMENT_WRITERS = {
    A.Bind: _w_bind, A.Memo: _w_bind, A.CtxAppend: _w_ctx_append, A.Call: _w_call, A.Return: _w_return,
    A.Var: _w_var, A.Lit: _w_lit, A.When: _w_when, A.Unless: _w_block, A.Each: _w_each,
    A.Repeat: _w_block, A.Seq: _w_block, A.Pipe: _w_pipe, A.Ctx: _w_ctx, A.Match: _w_match,
    A.Route: _w_route, A.Fallback: _w_fallback, A.Loop: _w_block, A.Timeout: _w_block,
    A.Budget: _w_block, A.CapScope: _w_block, A.Parallel: _w_parallel, A.Race: _w_race,
    A.Retry: _w_block, A.Assert: _w_assert, A.Try: _w_try, A.Scope: _w_scope, A.Saga: _w_saga,
    A.Confirm: _w_block, A.Throttle: _w_block, A.Debounce: _w_block, A.Verify: _w_verify,
    A.Once: _w_block, A.Checkpoint: _w_checkpoint, A.Await: _w_await,
}


def format_header(draft: A.DraftAst) -> str:
    head = "flow"
    if draft.name is not None:
        head += " " + draft.name
    if draft.params:
        head += "(" + ", ".join(f"{p.name}: {p.ty.label()}" for p in draft.params) + ")"
    if draft.returns is not None:
        head += " -> " + draft.returns.label()
    return head + "\n"


def format_flow(draft: A.DraftAst) -> str:
    """``flux_lang::format::format``: the canonical plan text.

    Raises :class:`FormatError` (and nothing else) for an AST too deep to walk; the parser never
    produces one (:data:`~flux.lang.parser.MAX_NESTING`). Unpaired surrogates in strings built in
    code are written as U+FFFD, the one rule of :func:`flux.canonical.scrub_text`.
    """
    out = LineWriter()
    try:
        out.body(draft.body, 1)
    except RecursionError:
        raise FormatError("the plan nests too deeply to format; bind inner values to names "
                          "first") from None
    return scrub_text(format_header(draft) + "".join(out.lines))


def _bind_call_stmt(node: A.Node) -> Optional[str]:
    """The statement ``name = op(<literal>)`` written by :func:`_bind_call_line` — what the general
    arms of :func:`write_statement` write for it, without their dispatch; None for any other statement."""
    if type(node) is A.Bind and node.ty is None and node.effect is None:
        call = node.value
        if type(call) is A.Call and len(call.args) == 1 and type(call.args[0]) is A.Lit:
            return _bind_call_line(node.name, call.op, call.args[0].value)
    return None


def _bind_call_line(name: Any, op: Any, value: Any) -> Optional[str]:
    """``name = op(<compact value>)`` for a plain name and op; None when either needs ``$`` or
    ``@json`` (the general arms of :func:`write_statement` then write the statement). A plain name: an ASCII
    identifier (``IDENT``'s language, tested equal), not reserved."""
    if type(name) is not str or type(op) is not str or name in RESERVED or not name.isascii() \
            or not name.isidentifier() or op in RESERVED or not OPNAME.fullmatch(op):
        return None
    return name + " = " + op + "(" + compact_value(value) + ")"


def format_bind_call(name: str, op: str, value: Any) -> Optional[str]:
    """``format_flow`` of the one-statement flow ``name = op(<literal value>)`` — an adaptive turn's
    host plan (flux.agent.loop) — written straight from its parts, without walking the AST; None
    when that statement has no plain spelling (a name or op that needs ``$`` or ``@json``), for
    which the caller formats the AST. A property test checks it equals :func:`format_flow`."""
    if name in RESERVED or not IDENT.fullmatch(name) or op in RESERVED or not OPNAME.fullmatch(op):
        return None
    return scrub_text("flow\n  " + name + " = " + op + "(" + compact_value(value) + ")\n")


def format_statement(node: A.Node) -> str:
    """One top-level node formatted as its own one-statement flow (``flow\\n  <stmt>\\n``)."""
    return format_flow(A.DraftAst(body=(node,)))


def format_node_lines(node: A.Node, level: int = 0) -> list[str]:
    """The lines (each ending in ``\\n``) one statement occupies, indented ``level`` steps."""
    out = LineWriter()
    try:
        write_statement(node, level, out)
    except RecursionError:
        raise FormatError("the statement nests too deeply to format") from None
    return [scrub_text(line) for line in out.lines]
