"""The redactor every byte that leaves the process passes first: cassette cells, plan text,
model-cassette entries, manifests, exports, printed output and error lines.

Its passes (JSON string literals decoded first, registered secrets, PEM keys, URL passwords, credential
tokens and ``NAME=VALUE``) are idempotent; a serialised surface is redacted on its decoded values. The
order of the passes and how the fast path stays equal to the plain one are in docs/architecture.md.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from ..canonical import canonical_json, compact_json, json_string

__all__ = ["Redactor", "DEFAULT_MARKER", "secret_name", "same_json"]

DEFAULT_MARKER = "[redacted]"

# Pass 2 — PEM private keys. The label between BEGIN and PRIVATE KEY is optional ("RSA", "EC",
# "OPENSSH", "ENCRYPTED", …).
_PEM_LABEL = r"[A-Z0-9]+(?: [A-Z0-9]+)*"
_PEM_BLOCK = re.compile(
    r"(-----BEGIN (?:" + _PEM_LABEL + r" )?PRIVATE KEY-----)(.*?)(-----END (?:" + _PEM_LABEL + r" )?PRIVATE KEY-----)",
    re.DOTALL,
)
_PEM_OPEN = re.compile(r"(-----BEGIN (?:" + _PEM_LABEL + r" )?PRIVATE KEY-----)(.*)\Z", re.DOTALL)

# Pass 3 — URL userinfo password: scheme://user:PASS@
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*:)([^\s/?#@]+)(@)")

# Pass 4a — credential-prefix tokens. Each must stand alone (not glued to a longer word on the left).
_TOKEN_BODY = r"[A-Za-z0-9_\-]"
# A token stands alone after a non-word character — or after a JSON escape that ends a line or
# a field (``\n``, ``\r``, ``\t``) in a text that holds JSON (a model's answer, a verdict).
_ALONE = r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrt]))"
_PREFIX_TOKENS = re.compile(
    _ALONE + r"(?:"
    r"sk-ant-" + _TOKEN_BODY + r"{8,}"
    r"|sk-" + _TOKEN_BODY + r"{16,}"
    r"|gh[opusr]_[A-Za-z0-9]{16,}"
    r"|github_pat_[A-Za-z0-9_]{16,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{8,}"
    r"|AKIA[0-9A-Z]{16}(?![0-9A-Z])"
    r"|glpat-" + _TOKEN_BODY + r"{16,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r")"
)
# The token is the whole run of b64token characters *and* '=': RFC 6750 puts '=' only at the end,
# but a hostile or odd text does not follow it, and stopping at the first '=' handed the rest of the
# run to nobody ("Bearer API_KEY=v" hid "API_KEY=" and left "v" for a pass that no longer saw a NAME).
_BEARER = re.compile(r"(?i)(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))(bearer\s+)([A-Za-z0-9._~+/\-=]+)")

# Pass 4b — NAME=VALUE / NAME: VALUE / "NAME":"VALUE". NAME contains one of the words, not followed
# by a lowercase letter (so `tokens`, `keyboard`, `secretary` are not names of secrets, while
# `secretKey`, `api_key`, `GITHUB_TOKEN`, `db.password` are).
_NAME_WORD = r"(?:[Kk][Ee][Yy]|[Ss][Ee][Cc][Rr][Ee][Tt]|[Tt][Oo][Kk][Ee][Nn]|[Pp][Aa][Ss][Ss](?:[Ww][Oo][Rr][Dd]|[Ww][Dd]))(?![a-z])"
_NAME = r"[A-Za-z0-9_.\-]*?" + _NAME_WORD + r"[A-Za-z0-9_.\-]*"


def _assign_re(marker: str) -> re.Pattern[str]:
    # A bare value runs up to a delimiter; the marker counts as one unit so that an earlier pass's
    # marker inside the value (``key=ab[redacted]``) is swallowed whole rather than split at ``]``.
    return re.compile(
        r"(?:(?<![A-Za-z0-9_.\-])|(?<=\\[nrt]))"
        r"(?P<name>" + _NAME + r")"
        # (a tab in JSON text is the escape \t)
        r"(?P<sep>(?:\\?\")?(?:[ \t]|\\t)*[=:](?:[ \t]|\\t)*)"
        r"(?:"
        r"\"(?P<dq>(?:[^\"\\\n]|\\.)+)\""  # double-quoted value (JSON string, shell)
        r"|\\\"(?P<edq>(?:[^\"\\\n]|\\[^\"\n])+)\\\""  # \"value\": a quoted value inside a JSON string
        r"|'(?P<sq>[^'\n]+)'"  # single-quoted value
        # A bare value runs up to a delimiter, or up to a JSON escape that ends a line or a string
        # (``\n``, ``\r``, ``\t``, ``\"``) when the text is JSON holding a file's lines.
        r"|(?P<bare>(?:" + re.escape(marker) + r"|[^\s\"',;&{}\[\]\(\)\\]|\\(?![nrt\"]))+)"
        r")"
    )

_NAME_ONLY = re.compile(r"\A" + _NAME + r"\Z")

# The prefilter of passes 2-4: every match of _PEM_BLOCK/_PEM_OPEN contains "PRIVATE KEY-----",
# of _URL_USERINFO "://", of _PREFIX_TOKENS one of its literal prefixes, of _BEARER "bearer" (any
# case) and of the assignment pattern a _NAME_WORD (key / secret / token / passw, any case). The
# case-insensitive part matches more than the exact-case classes of _NAME_WORD (also e.g. the
# Kelvin sign for K), which only sends more text down the full path.
_MAY_MATCH_CASED = re.compile(r"PRIVATE KEY-----|://|sk-|gh[opusr]_|github_pat_|xox[abprs]-|AKIA|glpat-|AIza")
_MAY_MATCH_WORDS = ("bearer", "key", "secret", "token", "passw")  # any case
_MAY_MATCH = re.compile(_MAY_MATCH_CASED.pattern + "|(?i:" + "|".join(_MAY_MATCH_WORDS) + ")")


_MAY_MATCH_GH = re.compile(r"gh[opusr]_")
_MAY_MATCH_XOX = re.compile(r"xox[abprs]-")


def _may_match(text: str) -> bool:
    """``_MAY_MATCH.search(text) is not None``. On an ASCII text of more than a few characters (a
    plan, a tool's output, an id) the literals are looked for with ``in`` — the two with a character
    class only where their first letters occur — and the case-insensitive words with ``in`` on the
    lowered text (on ASCII, ASCII case folding is all ``(?i:…)`` does): several times faster than
    the regex, which tries its alternatives at every position. Any other text takes the regex."""
    if len(text) < 16 or not text.isascii():
        return _MAY_MATCH.search(text) is not None
    # (_MAY_MATCH_CASED's literals and _MAY_MATCH_WORDS, spelled out: one test each, no loop)
    if "PRIVATE KEY-----" in text or "://" in text or "sk-" in text or "github_pat_" in text or "AKIA" in text \
            or "glpat-" in text or "AIza" in text:
        return True
    if ("gh" in text and _MAY_MATCH_GH.search(text) is not None) or \
            ("xox" in text and _MAY_MATCH_XOX.search(text) is not None):
        return True
    low = text.lower()
    return "bearer" in low or "key" in low or "secret" in low or "token" in low or "passw" in low


# A JSON string literal, closed or cut off at the end of the text (a stream cut short), for texts
# that do not parse as a whole.
_JSON_STRING_TOKEN = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)("|\\?\Z)', re.DOTALL)
_JSON_KEY_COLON = re.compile(r"\s*:\s*")
_JSON_SCALAR = re.compile(r'-?[0-9][0-9.eE+\-]*')
_ESCAPED_BY_JSON = re.compile(r'[\x00-\x1f"\\]')  # what a JSON serialiser escapes
_LENIENT_JSON = json.JSONDecoder(strict=False)  # (a string literal in free text may hold a raw line break)
_FOREIGN_ESCAPE = re.compile(r'\\(?:/|u(?!00[01][0-9a-fA-F]))')  # what ours never write


def same_json(a: Any, b: Any) -> bool:
    """Type-strict deep equality of two JSON values (``1 == True == 1.0`` in Python, not in JSON)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    # NaN (which Python's json reads from the bare word) is the same value as itself here.
    return a == b or (a != a and b != b)


def _json_text(value: Any, sort: bool) -> str:
    return canonical_json(value) if sort else compact_json(value)


_CACHE_MAX_TEXT = 256  # longer texts are not memoized (rarely repeated, costly to keep)
_CACHE_MAX_ENTRIES = 8192


def _spellings(secret: str) -> set[str]:
    once, ascii_once = json_string(secret)[1:-1], json.dumps(secret)[1:-1]
    return {secret, once, ascii_once, json_string(once)[1:-1], json.dumps(once)[1:-1], json_string(ascii_once)[1:-1]}


def secret_name(name: str) -> bool:
    """Whether a key / variable name declares a secret (pass 4's NAME rule)."""
    return bool(_NAME_ONLY.match(name))


class Redactor:
    """``Redactor(secrets=(), marker="[redacted]")``; :meth:`redact` applies the four passes.

    Registered secrets shorter than ``min_secret_len`` (default 4) are ignored: redacting every
    ``"a"`` would shred all text and is never what a caller means.
    """

    def __init__(self, secrets: Iterable[str] = (), marker: str = DEFAULT_MARKER, *, min_secret_len: int = 4):
        self.marker = marker
        self.min_secret_len = min_secret_len
        self._secrets: list[str] = []
        self._secret_re: re.Pattern[str] | None = None
        self._assign = _assign_re(marker)
        self._memo: dict[str, str] = {}  # text -> redact(text), for short texts; replaced on register
        self._name_memo: dict[str, bool] = {}  # key -> secret_name(key)
        for s in secrets:
            self.register(s)

    # -- registration -------------------------------------------------------------------------

    def register(self, secret: str) -> None:
        """Add a secret value (pass 1). Values inside the marker, or containing it, are refused
        silently (they could never be told apart from an earlier redaction)."""
        if (not isinstance(secret, str) or len(secret) < self.min_secret_len or secret in self.marker
                or self.marker in secret):
            return
        if secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=lambda s: (-len(s), s))
            # One alternation, longest first, scanned left to right: each secret as it is and as JSON
            # spells it inside a string (once and twice escaped, with and without \uXXXX), so a text
            # that holds JSON (a file read, a model's structured answer) loses it too.
            spellings = {sp for s in self._secrets for sp in _spellings(s)}
            self._secret_re = re.compile("|".join(re.escape(s) for s in sorted(spellings, key=lambda s: (-len(s), s))))
            self._memo = {}  # a new dict (not clear()): a redaction racing this one fills the old one

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(self._secrets)

    @property
    def has_registered(self) -> bool:
        return bool(self._secrets)

    def leaves_alone(self, text: str) -> bool:
        """True when :meth:`redact` certainly returns ``text`` unchanged: no secret is registered
        and no pass 2-4 literal occurs in it (the prefilter), nor hides behind a ``\\uXXXX`` escape."""
        return self._secret_re is None and not _may_match(text) and not ("\\" in text and _FOREIGN_ESCAPE.search(text))

    def finds_nothing(self, text: str) -> bool:
        """True when :meth:`redact` certainly returns ``text`` unchanged, registered secrets or not:
        none of them occurs in it (pass 1 then replaces nothing, markers or no markers) and no pass
        2-4 literal does (the prefilter). Also true of every substring of ``text``."""
        secret_re = self._secret_re
        if "\\" in text and _FOREIGN_ESCAPE.search(text) is not None:
            return False  # (a \uXXXX escape may spell a literal the passes look for)
        return (secret_re is None or secret_re.search(text) is None) and not _may_match(text)

    def sees_all_of(self, text: str) -> bool:
        """True when :meth:`finds_nothing` on a JSON (or Flux-Lang) text also holds for every string
        decoded from it. Without a backslash every string reads in the text as it is. Otherwise only
        when the text escapes nothing but ``"``, ``\\`` and control characters (as this program's
        serialisers do: no ``\\uXXXX`` of a printable character, no ``\\/``) — then every literal
        the passes look for reads the same in the text — and no registered secret holds one of
        those characters."""
        if "\\" not in text:
            return True
        if _FOREIGN_ESCAPE.search(text) is not None:
            return False
        return not any(_ESCAPED_BY_JSON.search(s) for s in self._secrets)

    @property
    def secret_pattern(self) -> "re.Pattern[str] | None":
        """The registered secrets' pattern (None: none registered); a new object whenever a secret
        is registered — what a caller compares to know nothing was registered in between."""
        return self._secret_re

    # -- the passes -----------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        if not text:
            return text
        memo = self._memo
        out = memo.get(text)
        if out is not None:
            return out
        secret_re = self._secret_re
        # The string literals of a text that holds JSON first, decoded (their escapes hide what the
        # passes look for, and a pass over the escaped text could take a value's name away).
        out = self._redact_escaped_literals(text) if "\\" in text and '"' in text and not self.finds_nothing(text) \
            else text
        if secret_re is not None:
            out = self._redact_registered(out, secret_re)
        if _may_match(out):
            out = self._redact_patterns(out)
        if len(text) <= _CACHE_MAX_TEXT:
            if len(memo) >= _CACHE_MAX_ENTRIES:
                memo.clear()
            memo[text] = out
        return out

    def redact_credentials(self, text: str) -> str:
        """Only what is a credential whatever the prose around it: registered secrets (in their JSON
        spellings too), PEM private keys, URL passwords and credential-prefixed tokens — not the
        ``NAME: VALUE`` pass, which would take the word after "key:" in a message about a key. For
        this program's own messages (an error line), whose arguments were redacted whole."""
        if not text:
            return text
        if self._secret_re is not None:
            text = self._redact_registered(text, self._secret_re)
        return self._redact_keys_urls_prefixes(text)

    def _redact_all_passes(self, text: str) -> str:
        """The four passes, every one run on every text: what :meth:`redact` must equal."""
        if not text:
            return text
        if "\\" in text and '"' in text:
            text = self._redact_escaped_literals(text)
        if self._secret_re is not None:
            text = self._redact_registered(text, self._secret_re)
        return self._redact_patterns(text)

    def _redact_registered(self, text: str, secret_re: re.Pattern[str]) -> str:
        """Pass 1: registered values, longest first."""
        m = self.marker
        # Markers already in the text are fenced off, so a secret can never be found across a
        # marker's edge on a second run (idempotence); the fragments between markers are scanned
        # on their own.
        if m not in text:
            return secret_re.sub(m, text)
        return m.join(secret_re.sub(m, p) for p in text.split(m))

    def _redact_keys_urls_prefixes(self, text: str) -> str:
        """Pass 2 (PEM private-key bodies), pass 3 (URL userinfo passwords) and the credential-prefix
        tokens of pass 4."""
        m = self.marker
        if "PRIVATE KEY-----" in text:
            text = _PEM_BLOCK.sub(lambda mo: f"{mo.group(1)}\n{m}\n{mo.group(3)}", text)
            text = self._redact_open_pem(text)
        if "://" in text:
            text = _URL_USERINFO.sub(lambda mo: mo.group(1) + (m if mo.group(2) != m else mo.group(2)) + mo.group(3), text)
        return _PREFIX_TOKENS.sub(m, text)

    def _redact_patterns(self, text: str) -> str:
        """Passes 2-4."""
        text = self._redact_keys_urls_prefixes(text)
        # Bearer tokens and NAME=VALUE values are found on the same text and hidden together: run
        # one after the other, either could eat the other's anchor ("Bearer password: v" — the token
        # is "password", and the value v would lose its NAME; "token: Bearer v" — the value is
        # "Bearer", and v would lose its bearer word).
        return self._redact_bearers_and_assignments(text)

    def _redact_bearers_and_assignments(self, text: str) -> str:
        """Pass 4's bearer tokens and pass 4b over *every* ``NAME sep VALUE`` candidate, overlapping
        ones included.

        A plain left-to-right ``sub`` lets one candidate swallow the next one's name: in a grep line
        ``secret.txt:3:api_key = "v"`` the path ``secret.txt`` looks like a name, its "value" is
        ``3:api_key`` and the real value would survive. So every candidate is found (the search
        restarts right after each separator, where the next name may begin), each value's span is
        collected, and the union of spans is replaced — a span never hides another candidate.
        """
        if not text:
            return text
        rx = self._assign
        m = self.marker
        spans: list[tuple[int, int, str]] = []  # (start, end, quote) of each value to hide
        for mo in _BEARER.finditer(text):
            if mo.group(2) != m:
                spans.append((mo.start(2), mo.end(2), ""))
        pos = 0
        n = len(text)
        while pos < n:
            mo = rx.search(text, pos)
            if mo is None:
                break
            for group, quote in (("dq", '"'), ("edq", '"'), ("sq", "'"), ("bare", "")):
                value = mo.group(group)
                if value is None:
                    continue
                if group == "bare" and (not value.replace(m, "") or value in ("null", "true", "false")):
                    break  # already redacted, or a JSON literal that cannot be a secret
                if group != "bare" and value == m:
                    break
                spans.append((mo.start(group), mo.end(group), quote))
                break
            pos = mo.end("sep")
        if not spans:
            return text
        spans.sort()
        merged: list[list[int]] = []
        for start, end, _q in spans:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out: list[str] = []
        last = 0
        for start, end in merged:
            out.append(text[last:start])
            out.append(m)
            last = end
        out.append(text[last:])
        return "".join(out)

    def _redact_open_pem(self, text: str) -> str:
        # A BEGIN with no END after it (cut text): redact everything after the last header whose
        # body is not already the marker.
        out = []
        pos = 0
        for mo in re.finditer(r"-----BEGIN (?:" + _PEM_LABEL + r" )?PRIVATE KEY-----", text):
            if mo.start() < pos:
                continue
            end = _PEM_BLOCK.match(text, mo.start())
            if end is not None:
                out.append(text[pos:end.end()])
                pos = end.end()
                continue
            out.append(text[pos:mo.end()])
            out.append(self.marker)
            pos = len(text)
            break
        out.append(text[pos:])
        return "".join(out)

    # -- serialised values ----------------------------------------------------------------------

    def redact_json_text(self, text: str, *, sort: bool = True) -> str:
        """A JSON text redacted on its decoded values, then serialised again (``sort``: canonically,
        keys sorted; else in the value's own order).

        Unchanged values keep the text verbatim — after the text passes, as a last guard (they find
        nothing in ordinary JSON, and with nothing to hide the result is what redacting the text
        alone gives). A text that is not JSON (a tool input streamed only in part) has each string
        literal decoded, redacted and written back, and a value under a key that names a secret
        hidden, before the same guard."""
        if not text:
            return text
        if self.finds_nothing(text) and self.sees_all_of(text):
            return text
        try:
            value = json.loads(text)
        except (ValueError, TypeError, RecursionError):
            return self.redact(self._redact_json_fragments(text))
        try:
            scrubbed = self.redact_value(value)
            if same_json(scrubbed, value):
                return self.redact(text)
            return self.redact(_json_text(scrubbed, sort))
        except (RecursionError, ValueError, TypeError):
            return self.redact(self._redact_json_fragments(text))

    def _redact_escaped_literals(self, text: str) -> str:
        """The string literals of a text that holds JSON whose spelling has an escape, decoded,
        redacted and written back (one without an escape reads in the text as it is). Only a
        literal that stands where JSON puts a string — after ``[``, ``{``, ``,``, ``:`` or at the
        start, and before ``]``, ``}``, ``,``, ``:`` or the end — is one: a quote in prose pairs
        with another anywhere, and redacting that span alone could take a value's name away."""
        redact = self.redact
        n = len(text)

        def one(mo: "re.Match[str]") -> str:
            body = mo.group(1)
            if "\\" not in body:
                return mo.group(0)
            i = mo.start() - 1
            while i >= 0 and text[i] in " \t\r\n":
                i -= 1
            j = mo.end()
            while j < n and text[j] in " \t\r\n":
                j += 1
            if (i >= 0 and text[i] not in "[{,:") or (j < n and text[j] not in "]},:"):
                return mo.group(0)
            closed = mo.group(2) == '"'
            try:
                decoded = _LENIENT_JSON.decode('"' + body + '"')
            except ValueError:
                return mo.group(0)
            red = redact(decoded)
            if red == decoded:
                return mo.group(0)
            enc = json_string(red)
            return enc if closed else enc[:-1]

        return _JSON_STRING_TOKEN.sub(one, text)

    def _redact_json_fragments(self, text: str) -> str:
        """Each JSON string literal of a text that does not parse, decoded, redacted and written
        back (a literal cut off at the end stays cut off); a string or number after a key that
        names a secret becomes the marker."""
        out: list[str] = []
        pos = 0
        secret_key = False
        n = len(text)
        while pos < n:
            mo = _JSON_STRING_TOKEN.search(text, pos)
            if mo is None:
                break
            between = text[pos:mo.start()]
            if secret_key:  # the value right after a key that names a secret: a number, or the next string
                lead = len(between) - len(between.lstrip(" \t\r\n:"))
                num = _JSON_SCALAR.match(between, lead)
                if num is not None:
                    between = between[:lead] + json_string(self.marker) + between[num.end():]
                    secret_key = False
                elif lead != len(between):
                    secret_key = False  # something else comes first: no value of that key
            out.append(between)
            body, closed = mo.group(1), mo.group(2) == '"'
            try:
                decoded = _LENIENT_JSON.decode('"' + body + '"')
            except ValueError:
                decoded = None
            is_key = closed and _JSON_KEY_COLON.match(text, mo.end()) is not None
            if decoded is None:
                out.append(mo.group(0))
            elif secret_key and not is_key:
                enc = json_string(self.marker)
                out.append(enc if closed else enc[:-1])
            else:
                red = self.redact(decoded)
                if red == decoded:
                    out.append(mo.group(0))
                else:
                    enc = json_string(red)
                    out.append(enc if closed else enc[:-1])
            secret_key = is_key and decoded is not None and secret_name(decoded)
            pos = mo.end()
        out.append(text[pos:])
        return "".join(out)

    # -- structured values ----------------------------------------------------------------------

    def redact_value(self, value: Any) -> Any:
        """Scrub a JSON value node by node: string leaves, numbers and object keys; a scalar under a
        key that names a secret (``{"password": "hunter2"}``) becomes the marker."""
        t = type(value)
        if t is str:
            return self._memo.get(value) or self.redact(value)
        if t is dict:
            memo, names, redact, marker = self._memo, self._name_memo, self.redact, self.marker
            numbers_stay = self._secret_re is None
            out: dict[str, Any] = {}
            for k, v in value.items():
                if type(k) is not str:
                    k = str(k)
                rk = memo.get(k) or redact(k)
                secret = names.get(k)
                if secret is None:
                    secret = secret_name(k)
                    if len(names) < _CACHE_MAX_ENTRIES:
                        names[k] = secret
                tv = type(v)
                if secret and v is not None and not isinstance(v, (dict, list, bool)):
                    out[rk] = marker
                elif tv is str:  # the leaves, inline (see the scalar cases below)
                    out[rk] = memo.get(v) or redact(v)
                elif v is None or tv is bool or ((tv is int or tv is float) and numbers_stay):
                    out[rk] = v
                else:
                    out[rk] = self.redact_value(v)
            return out
        if t is list:
            return [self.redact_value(v) for v in value]
        if (t is int or t is float) and self._secret_re is None:
            # Digits, a sign, a point, an exponent, inf or nan: nothing but a registered secret
            # (pass 1) can match in a number's text, so with none registered it stays as it is.
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            text = str(value)
            red = self.redact(text)
            return value if red == text else red
        if isinstance(value, list):
            return [self.redact_value(v) for v in value]
        if isinstance(value, dict):
            return self.redact_value(dict(value))
        return value
