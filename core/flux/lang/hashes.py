"""flux's hashes that are built from Flux-Lang ASTs and op inputs.

Two serializations are in play and must not be confused: op inputs hash their *canonical* JSON
(every map key-sorted), ASTs hash their *declared-order* JSON (:mod:`flux.lang.astjson`).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from flux.canonical import canonical_json, sha256_hex

from . import ast as A
from .astjson import draft_json_text, node_json_text

__all__ = [
    "input_hash", "step_id", "stmt_hash16", "body_hash16", "flow_key", "fingerprint",
    "once_key", "memo_symbol", "body_json_text", "one_statement_hashes",
]


def input_hash(input_obj: Any) -> str:
    """``sha256(canonical_json(op input))`` — the cassette match key (64 hex)."""
    return sha256_hex(canonical_json(input_obj))


def step_id(op: str, input_hash_hex: str) -> str:
    """``step_<op>_<input_hash[0..16]>``."""
    return f"step_{op}_{input_hash_hex[:16]}"


def body_json_text(body: Iterable[A.Node]) -> str:
    """``serde_json::to_string(&Vec<Node>)``."""
    return "[" + ",".join(node_json_text(n) for n in body) + "]"


def stmt_hash16(node: A.Node) -> str:
    """The statement-ledger key of one top-level statement (16 hex)."""
    return sha256_hex(node_json_text(node))[:16]


def body_hash16(body: Iterable[A.Node]) -> str:
    return sha256_hex(body_json_text(body))[:16]


def flow_key(name: Optional[str], body: Iterable[A.Node]) -> str:
    """``<name>#<body_hash16>`` for a non-blank name, else ``h:<body_hash16>``."""
    h = body_hash16(body)
    if name is not None and name.strip():
        return f"{name}#{h}"
    return f"h:{h}"


def fingerprint(draft: A.DraftAst) -> str:
    """``plan_attempted.fingerprint``: sha256 of the whole DraftAst JSON (64 hex)."""
    return sha256_hex(draft_json_text(draft))


def one_statement_hashes(stmt_json: str) -> tuple[str, str]:
    """``(fingerprint, flow_key)`` of the unnamed, parameterless flow whose one statement has the
    :func:`~flux.lang.astjson.node_json_text` ``stmt_json`` — the texts :func:`fingerprint` and
    :func:`flow_key` hash, written around it (an adaptive host plan's; property-tested equal)."""
    return (sha256_hex('{"params":[],"body":[' + stmt_json + "]}"),
            "h:" + sha256_hex("[" + stmt_json + "]")[:16])


def once_key(label: str, body: Iterable[A.Node]) -> str:
    """The ``once_completed.label``: ``label + NUL + sha256(body json)[..16]``."""
    return f"{label}\u0000{body_hash16(body)}"


def memo_symbol(op: str, args: Iterable[A.Node]) -> str:
    """``@memo:`` + ``sha256(op + NUL + args json)[..32]``."""
    return "@memo:" + sha256_hex(op + "\u0000" + body_json_text(args))[:32]
