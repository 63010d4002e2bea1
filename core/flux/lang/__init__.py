"""Flux-Lang: the AST, its JSON and hashes, the canonical text (parser + formatter) and an
interpreter that writes a run's events.

Public entry points are re-exported here; see each module for details.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> submodule. Loaded on first use (PEP 562), so importing ``flux.lang.parser`` — as the
# session list does to check an interrupted turn — does not load the interpreter.
_EXPORTS = {
    "AstJsonError": "astjson", "draft_from_json": "astjson", "draft_to_json": "astjson",
    "node_from_json": "astjson", "node_to_json": "astjson",
    "OpCatalog": "catalog", "OpSpec": "catalog", "map_args_to_input": "catalog",
    "Interpreter": "interpreter", "ListSink": "outcomes", "OpOutcome": "outcomes", "PlanHalt": "outcomes",
    "RunResult": "outcomes", "ResumeError": "outcomes",
    "ResumeLedger": "ledger",
    "format_flow": "formatter", "format_statement": "formatter",
    "ParseError": "parser", "parse": "parser", "parse_expression": "parser", "parse_program": "parser",
    "body_hash16": "hashes", "fingerprint": "hashes", "flow_key": "hashes", "input_hash": "hashes",
    "memo_symbol": "hashes", "once_key": "hashes", "step_id": "hashes", "stmt_hash16": "hashes",
}


def __getattr__(name: str) -> Any:
    if name == "ast":
        return importlib.import_module(".ast", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ast", "AstJsonError", "draft_from_json", "draft_to_json", "node_from_json", "node_to_json",
    "body_hash16", "fingerprint", "flow_key", "input_hash", "memo_symbol", "once_key", "step_id",
    "stmt_hash16", "format_flow", "format_statement", "ParseError", "parse", "parse_expression",
    "parse_program",
    "OpCatalog", "OpSpec", "map_args_to_input", "Interpreter", "ListSink", "OpOutcome",
    "PlanHalt", "ResumeError", "ResumeLedger", "RunResult",
]
