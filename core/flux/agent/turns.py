"""What a turn is made of and runs with: its output (plans, tool calls, cells), the retry policy and the
turn's configuration."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..cassette.redactor import Redactor
from ..store.events import OpRecorded, Usage
from ..store.store import StoreWriter
from .approver import Approver
from .ops import Toolbox

__all__ = ["PlanRecord", "ToolCall", "TurnOutput", "RetryPolicy", "TurnConfig"]


@dataclass(slots=True)  # (no __dict__: one per tool call, kept for the turn)
class PlanRecord:
    step: int
    phase: Optional[str]
    fingerprint: str
    flow_key: str
    source: str  # the stored (redacted) plan_source


@dataclass(slots=True)  # (no __dict__: one per tool call, kept for the turn)
class ToolCall:
    id: str
    name: str
    input: Any
    status: str  # ok | error | denied | invalid
    content: str  # what the model got back (unredacted: this object never touches disk)
    plan_step: Optional[int] = None


@dataclass
class TurnOutput:
    """What one turn produced. ``cells`` are the recorded (redacted) cassette cells."""

    session: str
    turn_id: int
    outcome: str
    answer: str
    usage: Usage
    cost: Optional[float]
    model: str
    plans: list[PlanRecord] = field(default_factory=list)
    cells: list[OpRecorded] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: int = 0
    iterations: int = 0
    error: Optional[str] = None
    number: int = 0  # 1-based turn number in its session (turn_id is a global_seq, not for people)
    resurrected: Any = None  # the ResurrectReport of an interrupted turn finished before this one

    @property
    def ok(self) -> bool:
        return self.outcome in ("ok", "completed")

    def to_json(self) -> dict:
        return {
            "session": self.session, "turn": self.number, "turn_id": self.turn_id, "outcome": self.outcome, "answer": self.answer,
            "model": self.model, "usage": self.usage.to_body(), "cost_usd": self.cost, "model_calls": self.model_calls,
            "iterations": self.iterations, "error": self.error,
            "plans": [{"step": p.step, "phase": p.phase, "fingerprint": p.fingerprint, "flow_key": p.flow_key}
                      for p in self.plans],
            "tool_calls": [{"id": t.id, "name": t.name, "status": t.status} for t in self.tool_calls],
            "cells": len(self.cells),
        }


@dataclass
class RetryPolicy:
    """Retry a retryable provider error (429, 5xx, dropped connection) with exponential backoff."""

    attempts: int = 4  # total tries
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def delay(self, attempt: int) -> float:
        return min(self.base_delay_s * (2 ** (attempt - 1)), self.max_delay_s)


@dataclass
class TurnConfig:
    writer: StoreWriter
    session: str
    model_name: str  # stored on events (``openai:gpt-4.1-mini``)
    request_model: str  # sent in requests
    provider: Any
    provider_name: str
    toolbox: Toolbox
    approver: Approver
    redactor: Redactor
    cap: int
    cassette: bool
    instructions: Optional[str] = None
    max_iter: int = 20
    max_tokens: int = 4096
    temperature: Optional[float] = None
    prices: Any = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Any] = asyncio.sleep
    timer: Callable[[], int] = lambda: time.perf_counter_ns() // 1000
    on_event: Optional[Callable[[dict], None]] = None
    # Wraps the live host (approver + toolbox) — what-if re-plans pin the world with a Frozen tape.
    host_wrap: Optional[Callable[[Any], Any]] = None
    # Ops of concurrent `parallel`/`race` branches run in worker threads (False: inline, in order).
    concurrent_ops: bool = True
