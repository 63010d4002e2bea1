"""The test kit's failures.

:class:`ScenarioError` is a :class:`~flux.errors.FluxError` (bad fixture, refused record: a one-line
``error:`` on the CLI). :class:`~flux.errors.AssertionFailed` (defined beside the other errors, so the
time machine's what-if assertions raise it too) is an ``AssertionError`` whose text is meant to be acted on: what was expected, what happened, the side-by-side trajectory where it helps, and the
command that re-baselines when the change is intended.
"""

from __future__ import annotations

from typing import Any

from ..errors import AssertionFailed, FluxError

__all__ = ["ScenarioError", "MissingFixture", "AssertionFailed", "JudgeMiss", "kit_failure"]


class ScenarioError(FluxError):
    """The scenario cannot be loaded, recorded or checked."""


class MissingFixture(ScenarioError):
    """No recorded fixture where one is expected: record first (never a skip)."""


class JudgeMiss(ScenarioError):
    """A judge request with no recorded verdict in judge.jsonl."""


def kit_failure(excinfo: Any) -> bool:
    """pytest's ``__tracebackhide__`` test for the kit's own frames: a failure the kit raised on
    purpose (an :class:`AssertionFailed`, a one-line :class:`~flux.errors.FluxError`) reads as its
    message and diff, without the library frames it passed through; anything else (a bug) keeps
    every frame."""
    return bool(excinfo.errisinstance((AssertionFailed, FluxError)))
