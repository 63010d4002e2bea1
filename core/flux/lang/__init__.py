"""Flux-Lang: the AST, its JSON and hashes, the canonical text (parser + formatter) and an
interpreter that writes the run events of spec §2.3.

Public entry points are re-exported here; see each module for details.
"""

from __future__ import annotations

from . import ast
from .astjson import (
    AstJsonError, draft_from_json, draft_to_json, node_from_json, node_to_json,
)
from .catalog import OpCatalog, OpSpec, map_args_to_input
from .interpreter import (
    Interpreter, ListSink, OpOutcome, PlanHalt, ResumeError, ResumeLedger, RunResult,
)
from .formatter import format_flow, format_statement
from .parser import ParseError, parse, parse_expression
from .hashes import (
    body_hash16, fingerprint, flow_key, input_hash, memo_symbol, once_key, step_id, stmt_hash16,
)

__all__ = [
    "ast", "AstJsonError", "draft_from_json", "draft_to_json", "node_from_json", "node_to_json",
    "body_hash16", "fingerprint", "flow_key", "input_hash", "memo_symbol", "once_key", "step_id",
    "stmt_hash16", "format_flow", "format_statement", "ParseError", "parse", "parse_expression",
    "OpCatalog", "OpSpec", "map_args_to_input", "Interpreter", "ListSink", "OpOutcome",
    "PlanHalt", "ResumeError", "ResumeLedger", "RunResult",
]
