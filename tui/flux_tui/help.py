"""Per-panel help: what each panel shows and how to read it (F1 / ? explains the focused one)."""

from __future__ import annotations

__all__ = ["HELP", "APP_HELP"]

APP_HELP = """\
flux-tui browses a flux store directory (events.db): sessions, their turns, the plans the host
accepted (canonical Flux-Lang) and the cassette cells (recorded op results). Browsing writes
nothing; fork (f), what-if (w) and resurrect (R) write a new session, or finish an interrupted
turn, after the side-effect gate — a recorded session is never changed. The store is watched:
rows another process appends show up within a second.
Tab / Shift+Tab move between panels; Ctrl+P opens the command palette; q quits."""

HELP: dict[str, tuple[str, str]] = {
    "sessions": ("Sessions", """\
One row per session in the store, newest first. Columns: id, model, messages, turns, the last
turn's outcome, cost (? = a model without a known price, never $0), last update, status and
lineage. "⚠ interrupted" marks a session whose newest turn has an accepted plan and no end — flux
can resurrect it. "open turn" marks a turn with no end that flux does not flag (the session screen
says why). Lineage shows forks (⋔), what-ifs (?) and sub-agents (↳) with their source session.

Per-session facts (turns, outcome, cost, status) are computed in the background, visible rows
first; "…" means not computed yet. / filters by id, model or conversation text; s cycles the sort
column, r reverses it; Enter opens the session; l shows its lineage; d diffs the highlighted session
against another one (default: its fork source). t groups the list: each session's children (forks,
what-ifs, sub-agents) right under it, drawn ├ └, roots in the chosen sort ("grouped by source" in the
header; t again lists every session flat, the default). R resurrects the highlighted session when it is
⚠ interrupted. y copies its id; D deletes it when the time machine made it (a fork, what-if or check),
after listing what goes. Clicking a column header sorts by it."""),
    "filter": ("Filter", """\
Type to filter the sessions list. Ids and models match at once; conversation text (user and
assistant messages, tool calls and results) is searched in the store in the background.
Enter goes back to the list keeping the filter; Esc clears it."""),
    "turns": ("Turns", """\
The session's turns in order (1-based, as flux numbers them): outcome, plan count and the user's
input. ✓ ended ok, ✗ ended with an error outcome, ⚠ interrupted (flagged for resurrection),
… still open. [ and ] step turns from anywhere. Below: the selected turn's details, its usage and
cost, and the session's totals."""),
    "timeline": ("Plan & cells", """\
The selected turn's accepted plans as Flux-Lang, statement by statement; under each statement the
cassette cells (recorded op results) it dispatched. The cursor stops on every statement and every
cell: ↑/↓ or j/k step, n/N jump to the next/previous error (a halted statement or a cell with
is_error or denied), g/G first/last.

Markers: ✓ completed, ↷ skipped (fast-forwarded on a resume), ▸ dispatched (ran, no ledger row —
the turn never ended), ✗ halted or has an error cell, · not run. Cell flags: err, denied,
redacted, truncated. The inspector (below, or beside the tabs on a wide terminal) shows the item
under the cursor. r replays the
session from tape and marks the first column ✓ served / ✗ diverged / ○ unconsumed (Esc clears).
d diffs it against another session. f forks the session at the statement under the cursor; w asks
a what-if there (what if this cell had returned something else); R resurrects an interrupted turn."""),
    "replay": ("Replay report", """The last hermetic replay of this session: faithful or not, how many recorded cells were served
(C/T), each replayed plan by flow_key (✓ ran, ✗ halted — reproduced or diverged), the divergence
message, plans without a stored source and the cells left unconsumed. A replay never writes the
store. r runs it again; Esc clears the marks."""),
    "diff": ("Diff", """Two recorded runs aligned statement by statement (or cell by cell when a run has no statement
rows), A on the left, B on the right. Markers: = same statement and output; ~ the plan diverges
(the agent did something else); ≠ same statement, different world (its recorded output differs,
shown on the second line); a position only one side has is a ~ row with ∅ on the empty side. When
positions drift (a fork whose injected value dispatched nothing has one cell fewer), the rows are
aligned as a sequence instead: each side numbers its own cells, a cell only one side has is an empty
side, and later calls stay beside the same calls. The first divergence
is focused on open; n/N jump between differences; Enter opens the row's payloads side by side;
s swaps A and B. The panel below explains the row under the cursor."""),
    "diff-prompt": ("Diff against", """The session to compare with: s_<n>, a bare number, or last (the newest session). The default is
the session's fork source, else the last session you diffed. An id the store does not hold is
refused here."""),
    "diff-detail": ("Payloads", """The row's two sides: recorded outputs for a ≠ row, statements for a ~ row. JSON is pretty-printed
and coloured; lines that differ are red on A's side and green on B's. Below: what changed — a
structural diff (deepdiff) for JSON, a line diff otherwise. Esc goes back to the rows."""),
    "inspector": ("Inspector", """\
Everything recorded about the item under the timeline cursor. For a cell: the op, its input as
pretty JSON (the raw text when the recorded view was truncated), the content the op returned and
its display view, the flags (is_error, denied, redacted, truncated), input_hash (and
input_hash_redacted when the input held a secret), step, seq and timestamp. For a statement: its
plan, node, statement hash, status and halt reason."""),
    "conversation": ("Conversation", """\
The messages of the selected turn (a toggles the whole conversation): user and assistant text,
thinking, and tool_use / tool_result blocks as cards (errors in red). A compaction replaces the
history before it, as flux reads it."""),
    "observations": ("Observations", """\
The evidence rows flux flushed for the turn (kind, phase, data). They are written in a batch after
the turn ends, so their timestamps are the flush time, not the time of the fact. o toggles."""),
    "unknown": ("Unknown events", """\
Events of kinds (or run variants) this reader does not know — written by a newer flux. They are
listed here with their raw data rather than hidden."""),
    "lineage": ("Lineage", """\
The whole family of the session, as a tree: the root source, its forks (⋔, with the statement they
branched at), what-ifs (?), checks (✓), sub-agents (↳) and their own children, read from the
registry's correlation_id. Each fork, what-if and check says how it differs from its parent (the
run diff, computed in the background and cached): = same, ~ plan, ≠ world rows, and the statement
where it first diverges. Enter opens the highlighted session; d opens its diff against its parent;
u opens its parent."""),
    "fork": ("Fork", """\
Branch this session at the statement under the cursor into a new session linked to it (⋔). The
statements before it are replayed from the recording — no model call, no side effect — and the
fork diverges here in one of three modes (F2 cycles): Inject puts a JSON value in this statement's
binder (prefilled with the recorded result; JSON is checked as you type); Edit plan replaces the
plan from this statement on (Flux-Lang, parsed and checked against the ops as you type; Fork stays
disabled while it fails); Re-plan runs a new agent turn with the prompt and the model. Every change
is checked without writing anything, and the lines below say what will happen: "offline: no model
call, no side effect" forks at once; anything that would run live goes through the side-effect gate
first. Ctrl+R forks; then the fork opens and d diffs it against its source."""),
    "what-if": ("What-if", """\
Ask what would have happened if one thing had been different, by default without calling a model:
the whole session re-runs from its recording into a new session linked to it (?), with this change — what
this cell returned, what every call to its op returned (a JSON value, prefilled with the recorded
one and checked as you type; a JSON string is the raw text), or the policy (a TOML/JSON policy file
re-authorizing every dispatch, as `flux what-if --policy`). F2 cycles the question. Off tape — a
dispatch the recording has no cell for, because the change sent the run elsewhere — halts there by
default ("offline: no model call, no side effect"); F3 switches to go live, which passes the
side-effect gate first. F4 narrows the scope from the whole session to this turn only (`flux what-if
--turn N`). F5 re-plans instead (`flux what-if -m MODEL --instructions TEXT`): the earlier turns
replay from tape and one live model turn re-drives the turn (this one, or the last) against the
frozen world, with the model and the instructions (its system prompt) you type; a model that cannot
be called (unknown, no key) is refused here in one line, and the model call always passes the gate.
Ctrl+R runs it; the result opens as the diff against the source with the first divergence focused,
and the header says whether it stayed hermetic."""),
    "gate": ("Going live", """\
The side-effect gate. Everything listed here would be dispatched for real: each op with its
declared effect (write, exec, network; an op that declares none counts as write), its input, and
why it runs (the fork's tail, the op that was in flight when the process died, a re-plan), in the
workspace shown; a model call is network. y runs it live and records every dispatch as a cassette
cell; n or Esc goes back — nothing runs and nothing is written."""),
    "resurrect": ("Resurrect", """\
Finish the interrupted turn of this session from where the process died, on the same session, with
no model call: statements the ledger shows completed fast-forward, cells recorded before the kill
are served from tape exactly once, and only an op that has no cell runs again (the gate lists it
first). y resurrects; afterwards this panel is the report — fast-forwarded, served from the
cassette, run live, and any divergence — and the turn's markers update."""),
    "delete": ("Delete sessions", """\
Delete a session the time machine made — a fork, a what-if, a check — and every session derived from
it, for good. The panel lists each session with its lineage and its number of events before anything
happens; the store stays read-only until y, then one transaction removes them all (or, on an error,
none). Recordings and sub-agents are never offered. A deleted session's id is never given out again.
n or Esc closes with nothing deleted."""),
    "notice": ("Store notice", """\
The store could not be opened or holds no session yet. The message says why and what to do:
point --store at a directory that holds events.db, or run `flux-tui --demo` to explore a demo
store."""),
    "tests": ("Tests", """\
The recorded scenarios under the folder, run as flux test runs them (offline, $0): one row each
with its replay (the recorded plans re-executed from the cassette, and plan.flux.snap), its check
(today's agent loop re-driven against the recording) and the first divergence. A directory that
looks like a scenario but lacks a file, and a *.golden.json no scenario owns, are red rows of their
own. Enter shows golden ↔ this run and every other failure (the plan snapshot diff flux test -v
prints). r runs every scenario again, t the highlighted one; u accepts its new plan snapshot and
trajectory golden — what flux test --update rewrites — after you confirm; a check failure needs a
re-record instead. / filters by name; Esc clears the filter, then goes back (started with --tests,
this is the first screen: q quits)."""),
    "test-detail": ("Test result", """\
Golden (left) ↔ this run (right), aligned: = same, ≠ changed, - golden only, + this run only; ▶
marks the first divergence. Below the trajectory, each other failure under its heading — the plan
snapshot's per-line diff (- plan.flux.snap, + the recorded plans), a trajectory golden's diff, an
error. n jumps to the next change, Esc goes back to the scenarios."""),
    "help": ("Help", "This help. Esc closes it."),
}
