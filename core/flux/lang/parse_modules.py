"""The top level of a ``.flux`` file: the ``flow`` header and body, and the module declarations —
``permissions``, ``agent``, ``agent_loop``, ``channel``, ``datasource``, ``board``, ``trigger``,
``journey`` and composite ``op``."""

from __future__ import annotations

import re
from typing import Any, Optional

from . import ast as A
from . import program as P
from .parse_statements import StatementRules
from .parse_text import DECL, MAX_JSON_DEPTH, SIGIL_NAME

__all__ = ["ModuleRules"]

_DECLS = ("agent", "agent_loop", "channel", "datasource", "board", "trigger", "journey", "op",
          "permissions")
_DECL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
_OP_META = ("description", "risk", "idempotency", "effects", "limits", "expose", "view")
_OP_EFFECTS = ("read", "write", "network", "model", "process", "browser", "filesystem",
               "file_system", "local_system")


class ModuleRules(StatementRules):
    """The flow and module rules of the parser (mixed into it)."""

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
            m = DECL.match(self.src, self.pos)
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
                pm = SIGIL_NAME.match(self.src, self.pos + (self.src[self.pos:self.pos + 1] == "$"))
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
