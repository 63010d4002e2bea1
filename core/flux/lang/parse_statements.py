"""Flux-Lang statements: lines and indented blocks, binds and context appends, and one rule per
statement keyword (``when``, ``each``, ``repeat``, ``match``, ``parallel``, ``retry``, ``await``, …)."""

from __future__ import annotations

import re
from typing import Iterator, Optional

from . import ast as A
from .parse_expressions import ExpressionRules
from .parse_text import CLAUSE_WORDS, OPNAME, SIGIL_NAME, STATEMENT_KEYWORDS, U32_MAX

__all__ = ["StatementRules"]

_SCOPE_BIND = re.compile(r"(?:\$([A-Za-z0-9_]+)|([A-Za-z_][A-Za-z0-9_]*))[ \t]*=(?!=)")


class StatementRules(ExpressionRules):
    """The statement rules of the parser (mixed into it)."""

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
                if src[i] == "#" and self.comments is not None:
                    self.comments[i] = src[i:self.n if end < 0 else end]
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

    def clauses(self, indent: int, words: tuple[str, ...], expected: str) -> Iterator[tuple[int, str]]:
        """``(clause indent, word)`` for each clause line one level in under ``indent`` that starts with one of
        ``words``, until a line that sits no deeper; a deeper line that is not a clause is ``expected …``."""
        ci = self.clause_indent(indent)
        if ci is None:
            return
        while True:
            w = self.clause(ci, words)
            if w is None:
                pk = self.peek_line()
                if pk is not None and pk[0] > indent:
                    raise self.error(f"expected {expected}", pk[1])
                return
            yield ci, w

    def clause_block(self, indent: int, word: str) -> tuple:
        """The block of a ``word`` clause at ``indent`` after a block (``else``, ``finally``, a saga's
        ``undo``), or ``()`` when the next line is not that clause."""
        if self.clause(indent, (word,)):
            self.eol()
            return self.block(indent)
        return ()

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
            sm = SIGIL_NAME.match(src, sym_start)
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
        return A.When(cond, then, self.clause_block(indent, "else"))

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
        mx = self.integer("the repeat count", U32_MAX)
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
        seen: set[str] = set()
        for _ci, w in self.clauses(indent, ("purpose", "budget", "include", "exclude"),
                                   "purpose, budget, include or exclude"):
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
        saw_default = False
        for ci, w in self.clauses(indent, ("case", "default"), "`case` or `default`"):
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
        for ci, _w in self.clauses(indent, ("branch",), "`branch`"):
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
        mx = self.integer("the retry count", U32_MAX)
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
        return A.Scope(acquire, bind, body, self.clause_block(indent, "finally"))

    def _st_saga(self, indent: int) -> A.Node:
        self.eol()
        steps: list = []
        for ci, _w in self.clauses(indent, ("step",), "`step` or `undo`"):
            self.eol()
            body = self.block(ci)
            steps.append(A.SagaStep(body, self.clause_block(ci, "undo")))
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
            mx = self.integer("the throttle max", U32_MAX)
            self.expect(",")
            self.expect_word("per")
            self.expect(":")
        else:  # the older spelling: `throttle "api" 5 per 1m`
            mx = self.integer("the throttle max", U32_MAX)
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
        m = OPNAME.match(self.src, self.pos)
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
