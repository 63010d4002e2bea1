"""The session screen's header line: the store and the session on the left; on the right its
model, size, lineage, liveness (⚠ interrupted / ● recording) and the replay's badge."""

from __future__ import annotations

from rich.text import Text

from flux.model.interrupted import InterruptCheck
from flux.model.lineage import lineage_of
from flux.model.session import SessionDetail

from ..fmt import lineage_mark
from ..replay_marks import ReplayMarks

__all__ = ["session_header"]


def session_header(store_name: str, session_id: str, detail: SessionDetail | None, check: InterruptCheck, *,
                   error: str | None, replay_running: tuple[int, int] | None,
                   replay: ReplayMarks | None) -> tuple[Text, Text]:
    left = Text.assemble(("flux-tui", "bold"), "  ", ("store ", "dim"), (store_name, "bold"), ("  ›  ", "dim"),
                         (session_id, "bold cyan"))
    right = Text()
    if error is not None:
        right.append("cannot read", style="bold red")
        return left, right
    if detail is None:
        right.append("loading…", style="dim")
        return left, right
    right.append(detail.row.model or "–")
    if detail.partial:
        count = f"{detail.row.last_seq:,} events"
    else:
        count = f"{len(detail.cells)} cell{'s' if len(detail.cells) != 1 else ''}"
    right.append(f" · {len(detail.turns)} turn{'s' if len(detail.turns) != 1 else ''} · {count}", style="dim")
    lin = lineage_of(detail.row)
    if lin is not None:
        right.append(f" · {lineage_mark(lin)} ← {lin.source}{lin.detail if lin.kind in ('fork', 'what-if') else ''}",
                     style="magenta")
    if check.interrupted is not None:
        right.append(" · ")
        right.append("⚠ interrupted", style="bold yellow")
    elif check.recording_pid is not None:
        right.append(" · ")
        right.append("● recording", style="bold cyan")
    if replay_running is not None:
        done, total = replay_running
        right.append(" · ")
        right.append(f"replaying {done}/{total}…" if total else "replaying…", style="bold cyan")
    elif replay is not None:
        right.append(" · ")
        if replay.faithful and replay.report.tape_end is not None:
            right.append(" REPLAY ✓ reproduced · ⏸ tape ends ", style="bold reverse green")
        elif replay.faithful:
            right.append(" REPLAY ✓ faithful ", style="bold reverse green")
        else:
            right.append(" REPLAY ✗ " + ("diverged " if replay.report.diverged else "not faithful "),
                         style="bold reverse red")
    return left, right
