"""The session screen's "Loop" tab: which agent-loop program the selected turn ran
(``agent-loops/<sha>.flux``, the program flux stores by its hash), highlighted."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text

from flux.lang.agent_loops import AgentLoop, load_agent_loop

from .highlight import highlight_flux

__all__ = ["AgentLoopCache", "render_agent_loop"]


class AgentLoopCache:
    """Loop programs by sha256 for one store (files are immutable: named by their content)."""

    def __init__(self) -> None:
        self._loops: dict[tuple[str, str], AgentLoop | None] = {}

    def get(self, store_dir: Path, binding) -> AgentLoop | None:
        sha = binding.get("source_sha256") if isinstance(binding, dict) else None
        key = (str(store_dir), sha if isinstance(sha, str) else "")
        if key not in self._loops:
            self._loops[key] = load_agent_loop(store_dir, binding)
        return self._loops[key]


def render_agent_loop(loop: AgentLoop | None) -> RenderableType:
    if loop is None:
        return Text("this turn records no agent-loop program (no loop_binding — older engines and "
                    "the committed fixture write none)", style="dim italic")
    head = Text.assemble(("agent loop ", "bold"), (loop.name, "bold #88c0d0"),
                         ("  " + loop.summary().split(" · ", 1)[-1], "dim"))
    parts: list[RenderableType] = [head]
    if loop.problem is not None:
        parts.append(Text(loop.problem, style="bold red"))
    if loop.source is not None:
        width = len(str(loop.source.count("\n") + 1))
        body = Text(no_wrap=True, end="")
        for i, line in enumerate(highlight_flux(loop.source.rstrip("\n")).split("\n"), 1):
            body.append(f"{i:>{width}} ", style="dim")
            body.append_text(line)
            body.append("\n")
        parts.append(body)
    return Group(*parts)
