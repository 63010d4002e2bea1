"""The read models' SQL, written in SQLite's dialect as every backend is asked it, rewritten into
Postgres's so that one query means the same on both (:func:`to_postgres`; the constructs it
rewrites and how: docs/store-format.md, "One dialect of SQL")."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["to_postgres", "BAD_ROWS", "json_path"]

# Where the reader puts the ARRAY of global_seqs whose payload is not JSON.
BAD_ROWS = "__flux_bad_rows__"

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_PATH = r"'(\$[^']*)'"
_J = "(payload::jsonb)"
_JSON_TYPE = re.compile(r"json_type\(payload, " + _PATH + r"\)")
_SUM_EXTRACT = re.compile(r"SUM\(json_extract\(payload, " + _PATH + r"\)\)", re.IGNORECASE)
_NUMBER_THEN = re.compile(r"(json_type\(payload, '[^']*'\) IN \('integer', 'real'\) THEN )json_extract\(payload, " + _PATH + r"\)")
_TEXT_COMPARED = re.compile(r"json_extract\(payload, " + _PATH + r"\)(?=\s*(?:=|!=|<>|IN \(|IS NOT |IS )\s*\(?')")
_EXTRACT = re.compile(r"json_extract\(payload, " + _PATH + r"\)")
_JSON_VALID = re.compile(r"json_valid\(payload\)")
_UNARY_PLUS = re.compile(r"(?<=[\s(,])\+(?=[A-Za-z_])")
_IS_NOT_LITERAL = re.compile(r"\bIS NOT (?=')")
_IS_LITERAL = re.compile(r"\bIS (?=')")
_INSTR = re.compile(r"\binstr\(", re.IGNORECASE)
_LIKE = re.compile(r"(?<![A-Za-z_])LIKE(?= )")
_TYPEOF_N = re.compile(r"typeof\(n\) = 'integer'")
_FROM_EVENTS = re.compile(r"\bFROM events(?=\s+WHERE\b|\s+GROUP\b|\s+ORDER\b|\s*$|\s*\))")
# The payload parsed once per row (a LATERAL that is not flattened): every json_extract of a row
# then reads one jsonb, where a cast per call parsed the text eight times (8x on a listing).
_PARSED_ONCE = "FROM events CROSS JOIN LATERAL (SELECT {value} AS v OFFSET 0) AS __j"


def json_path(path: str) -> str:
    """SQLite's ``$.a.b`` (or ``$.a[0]``) as Postgres's text-array path literal ``'{a,b}'``."""
    parts = []
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path[1:]):
        parts.append(name if name else index)
    inner = ",".join('"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in parts)
    return "'{" + inner.replace("'", "''") + "}'"


def _json_type(m: re.Match) -> str:
    p = json_path(m.group(1))
    v = f"({_J} #> {p})"
    return (f"(CASE jsonb_typeof({v}) WHEN 'number' THEN (CASE WHEN ({_J} #>> {p}) ~ '^-?[0-9]+$' THEN 'integer'"
            f" ELSE 'real' END) WHEN 'string' THEN 'text' WHEN 'boolean' THEN ({_J} #>> {p})"
            f" ELSE jsonb_typeof({v}) END)")


def _number(path: str) -> str:
    p = json_path(path)
    return f"(CASE WHEN jsonb_typeof({_J} #> {p}) = 'number' THEN ({_J} #>> {p})::float8 END)"


def _code(part: str) -> str:
    """One stretch of SQL outside string literals."""
    part = part.replace("%", "%%").replace("?", "%s")
    part = _UNARY_PLUS.sub("", part)
    part = _INSTR.sub("strpos(", part)
    part = _LIKE.sub("ILIKE", part)  # SQLite's LIKE ignores ASCII case
    return part.replace("json_valid(payload)", f"(global_seq <> ALL({BAD_ROWS}))")


@lru_cache(maxsize=512)
def to_postgres(sql: str) -> str:
    """``sql`` (SQLite's dialect, ``?`` placeholders) in Postgres's (psycopg's ``%s``)."""
    sql = _TYPEOF_N.sub("TRUE", sql)
    sql = _SUM_EXTRACT.sub(lambda m: "SUM(" + _number(m.group(1)) + ")", sql)
    sql = _NUMBER_THEN.sub(lambda m: m.group(1) + _number(m.group(2)), sql)
    sql = _JSON_TYPE.sub(_json_type, sql)
    sql = _TEXT_COMPARED.sub(lambda m: f"({_J} #>> {json_path(m.group(1))})", sql)
    sql = _EXTRACT.sub(lambda m: f"({_J} #> {json_path(m.group(1))})", sql)
    if _J in sql and len(_FROM_EVENTS.findall(sql)) == 1:
        guarded = "json_valid(payload)" in sql  # a malformed row must not be parsed at all
        value = f"CASE WHEN events.global_seq <> ALL({BAD_ROWS}) THEN events.payload::jsonb END" if guarded \
            else "events.payload::jsonb"
        sql = _FROM_EVENTS.sub(_PARSED_ONCE.format(value=value), sql.replace(_J, "__j.v"))
    sql = _IS_NOT_LITERAL.sub("IS DISTINCT FROM ", sql)  # (a literal follows: looked for before the split)
    sql = _IS_LITERAL.sub("IS NOT DISTINCT FROM ", sql)
    out, pos = [], 0
    for lit in _LITERAL.finditer(sql):
        out.append(_code(sql[pos:lit.start()]))
        out.append(lit.group(0).replace("%", "%%"))
        pos = lit.end()
    out.append(_code(sql[pos:]))
    return "".join(out)
