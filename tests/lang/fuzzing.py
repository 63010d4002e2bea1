"""Hostile Flux-Lang text for the parser fuzz tests and ``benchmarks/fuzz_lang.py``.

One oracle (:func:`check`) states the contract for any input text:

* ``parse`` returns a DraftAst or raises :class:`ParseError` — nothing else, ever;
* for an AST it returns, the formatter and every hash (``fingerprint``, ``flow_key``,
  ``stmt_hash16``) succeed, ``parse(format(ast)) == ast`` with equal hashes, and formatting is
  idempotent — or the formatter refuses with its own :class:`FormatError`.

The generators are driven by a ``random.Random`` so the same code serves hypothesis (through
``st.randoms``) and the long runner (seeded, reproducible).
"""

from __future__ import annotations

import random
from pathlib import Path

from flux.lang.formatter import FormatError, format_flow
from flux.lang.hashes import fingerprint, flow_key, stmt_hash16
from flux.lang.parser import MAX_NESTING, ParseError, parse, parse_program

SEED_DIR = Path(__file__).parent / "data" / "seeds"
FLUX_DIR = Path(__file__).parent / "data" / "flux"


class Violation(AssertionError):
    """The contract above was broken for one input."""


def check(text: str) -> str:
    """``"rejected"``, ``"roundtrip"`` or ``"refused"``; raises :class:`Violation` otherwise.

    ``parse_program`` (the module reader) is held to the same rule: a module or ParseError."""
    try:
        parse_program(text)
    except ParseError:
        pass
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"parse_program raised {type(exc).__name__}: {exc}") from exc
    try:
        draft = parse(text)
    except ParseError as exc:
        msg = str(exc)
        if not msg.startswith("line ") or "\n" in msg:
            raise Violation(f"ParseError without a one-line position: {msg!r}") from None
        return "rejected"
    except Exception as exc:  # noqa: BLE001 - the point is to catch anything else
        raise Violation(f"parse raised {type(exc).__name__}: {exc}") from exc
    try:
        formatted = format_flow(draft)
    except FormatError:
        return "refused"
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"format raised {type(exc).__name__}: {exc}") from exc
    try:
        fp = fingerprint(draft)
        key = flow_key(draft.name, draft.body)
        stmts = [stmt_hash16(n) for n in draft.body]
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"a hash raised {type(exc).__name__}: {exc}") from exc
    try:
        again = parse(formatted)
    except Exception as exc:  # noqa: BLE001
        raise Violation(f"formatted text does not parse: {exc}\n{formatted}") from exc
    if again != draft:
        raise Violation(f"round trip changed the AST\n--- formatted ---\n{formatted}")
    if (fingerprint(again), flow_key(again.name, again.body),
            [stmt_hash16(n) for n in again.body]) != (fp, key, stmts):
        raise Violation("round trip changed a hash")
    if format_flow(again) != formatted:
        raise Violation(f"formatting is not idempotent\n{formatted}")
    return "roundtrip"


# ------------------------------------------------------------------------------- generators

TOKENS = [
    "flow", "flow f", "goal \"g\"", "when", "else", "unless", "each", "in", "repeat", "until",
    "seq", "ctx", "match", "case", "default", "route", "fallback", "branch", "loop for", "every",
    "timeout", "budget", "with_tools", "parallel", "retry", "backoff", "delay", "assert", "try",
    "catch", "race", "scope", "finally", "saga", "step", "undo", "pipe", "confirm", "risk",
    "throttle", "debounce", "verify", "contains", "memo", "once", "checkpoint", "await", "return",
    "do", "peek", "fmt(", "parse(", "as:", "thing", "file", "path", "@json", "@effect(read)",
    "$", "$x", "x", "$x.a", "$x[0]", '$x["k"]', "?", "=", "+=", "->", "-> flat", ",", ":", "(",
    ")", "[", "]", "{", "}", "{ }", "[ ]", '"', '"""', "\"s\"", "'s'", "0", "-1", "1.5", "1e400",
    "9" * 30, "true", "false", "null", "+", "-", "*", "/", "%", "&&", "||", "!", "==", "!=", "<",
    ">=", "#", "\n", "\n  ", "\n    ", "\t", " ", "\r", "\r\n", "\x00", "\ud83d", "\\ud83d",
    "\ude00", "é", "🚀", "1s", "2m", "500ms", "len(", "expr(", "op(", "a.b", "x: 1", "\\",
    "agent a", "agent_loop l", "channel c", "datasource d", "trigger t", "journey j", "op o(",
    "permissions", "  on ", "  run ", "  kind ", "  tools [", "secret", "  limits {", "'",
]

BASE_SEEDS = [
    'flow\n  x = tool({"a":1})\n',
    'flow f(a: String) -> Number\n  x = read(path: "a")\n  when x > 3 && $y\n    return x\n  else\n'
    '    return 0\n',
    "flow\n  each i in $items -> flat out\n    y = f(i)\n  repeat 3, until: $done -> c\n    z = 1\n",
    "flow\n  parallel\n    branch a\n      x = 1\n    branch b\n      y = 2\n",
    'flow\n  try\n    x = f()\n  catch e\n    log(e)\n  retry 3, backoff: exponential, delay: 2s\n'
    '    y = g()\n',
    'flow\n  ctx p\n    purpose "p"\n    budget 10\n    include a, b\n  p += c\n',
    'flow\n  match $k\n    case "a"\n      x = 1\n    default\n      x = 2\n',
    'flow\n  x = { a: $b, c: [1, $d] }\n  y = fmt("hi {x}")\n  z = parse($x, as: "f64")\n',
    'flow\n  await r: String = "reply", when: $q\n  checkpoint "c"\n  once "o" -> r\n    x = 1\n',
    'flow\n  saga\n    step\n      x = 1\n    undo\n      y = 2\n  scope h = open()\n    x = 1\n'
    '  finally\n    close(h)\n',
    'flow\n  @effect(write_file)\n  x = write({"path":"a","content":"""l1\nl2\n"""})\n',
    'flow\n  loop for 30s, every: 2s, until: $ok -> r\n    x = 1\n  race 5s -> w\n    branch a\n'
    '      x = 1\n',
    'flow\n  x = thing file path "a.txt"\n  verify $x contains "y": "m"\n  assert $x, "m"\n',
]


def seeds() -> list[str]:
    """Real plans: the hand-written seeds, plus every shipped flux file and seed file on disk."""
    out = list(BASE_SEEDS)
    for d in (SEED_DIR, FLUX_DIR):
        if d.is_dir():
            out += [p.read_text(encoding="utf-8") for p in sorted(d.rglob("*.flux"))]
    return out


def random_text(rng: random.Random, size: int = 40) -> str:
    parts = []
    for _ in range(rng.randint(0, size)):
        r = rng.random()
        if r < 0.6:
            parts.append(rng.choice(TOKENS))
        elif r < 0.8:
            parts.append(" ")
        else:
            parts.append(chr(rng.choice([rng.randint(0, 0x7F), rng.randint(0, 0x10FFFF)])))
    head = rng.choice(["flow\n  ", "flow f\n  ", "", "flow\n"])
    return head + "".join(parts)


def mutate(rng: random.Random, text: str, rounds: int = 3) -> str:
    for _ in range(rng.randint(1, rounds)):
        n = len(text)
        i = rng.randint(0, n)
        j = min(n, i + rng.randint(0, 12))
        r = rng.random()
        if r < 0.25:
            text = text[:i] + text[j:]
        elif r < 0.5:
            text = text[:i] + rng.choice(TOKENS) + text[i:]
        elif r < 0.65:
            text = text[:i] + text[i:j] * rng.randint(2, 4) + text[j:]
        elif r < 0.8 and n:
            text = text[:i] + chr(rng.randint(0, 0x10FFFF)) + text[i + 1:]
        elif r < 0.9:
            text = text[:i] + hostile_fragment(rng) + text[j:]
        else:
            k = rng.randint(0, n)
            text = text[:i] + text[k:k + rng.randint(1, 30)] + text[i:]
    return text


def hostile_fragment(rng: random.Random) -> str:
    k = rng.choice([MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 127, 128, 129, 300, 1200])
    return rng.choice([
        "f(" * k + ")" * k,
        "{a: " * k + "$b" + "}" * k,
        "[" * k + "]" * k,
        "[" * k + "$a" + "]" * k,
        "(" * k + "$a" + ")" * k,
        "!" * k + "$a",
        "$a" + " + $a" * k,
        "9" * rng.choice([20, 21, 309, 4300, 4301, 5000]),
        rng.choice(["1e400", "-1e400", "1e308", "1e-400", "18446744073709551616",
                    "-9223372036854775809"]),
        rng.choice(["\ud83d", "\\ud83d", '"\\ud83d"', '"\ud83d\ude00"', "\udfff", "\x00",
                    '"\\u0000"', '"""\ud83d"""']),
    ])


def deep_flow(rng: random.Random) -> str:
    """A flow whose statement or expression nests around the limit."""
    k = rng.choice([MAX_NESTING - 2, MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 200, 400])
    kind = rng.choice(["when", "calls", "objs", "lists", "parens", "plus", "json", "atjson"])
    if kind == "when":
        return "flow\n" + "".join("  " * (i + 1) + "when $a\n" for i in range(k)) + \
            "  " * (k + 1) + "x = 1\n"
    inner = {
        "calls": "f(" * k + ")" * k,
        "objs": "{a: " * k + "$b" + "}" * k,
        "lists": "[" * k + "$a" + "]" * k,
        "parens": "(" * k + "$a" + ")" * k,
        "plus": "$a" + " + $a" * k,
        "json": "[" * (2 * k) + "]" * (2 * k),
        "atjson": "@json " + '{"kind":"return","value":' * k + '{"kind":"var","name":"a"}' +
                  "}" * k,
    }[kind]
    return f"flow\n  x = {inner}\n"


def one_input(rng: random.Random) -> str:
    """One fuzz input: random text, a mutated real plan, a deep flow or a hostile literal."""
    r = rng.random()
    if r < 0.3:
        return random_text(rng)
    if r < 0.85:
        return mutate(rng, rng.choice(_SEEDS))
    if r < 0.95:
        return deep_flow(rng)
    return "flow\n  x = " + hostile_fragment(rng) + "\n"


_SEEDS = seeds()
