"""The frozen world of a check: the client's ops, answered from the recorded tape.

:func:`frozen_toolbox` keeps every op's name, description, schema and effect and replaces its function
with the tape: a dispatch is served by the first unconsumed cell with the same op and input hash; one
the recording cannot explain is refused and latched (flux's ``OffTape::Halt``), never run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..agent.ops import Toolbox
from ..canonical import canonical_json
from ..cassette.replay import ReplayTape

__all__ = ["frozen_toolbox"]


def _served(tape: ReplayTape, name: str):
    def serve(**kwargs: Any) -> Any:
        return tape.serve(name, canonical_json(kwargs))

    return serve


def frozen_toolbox(toolbox: Toolbox, tape: ReplayTape) -> Toolbox:
    return Toolbox({name: replace(o, fn=_served(tape, name)) for name, o in toolbox.ops.items()})
