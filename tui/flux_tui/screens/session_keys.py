"""The session screen's keys, with their ids (a user keymap remaps them) and tooltips (F1 lists them)."""

from __future__ import annotations

from textual.binding import Binding

__all__ = ["SESSION_BINDINGS"]

_TURN_GROUP = Binding.Group("Turn", compact=True)
_ERROR_GROUP = Binding.Group("Error", compact=True)

SESSION_BINDINGS = [
    Binding("escape", "back", "Back", id="session.back",
            tooltip="Clear the replay marks if shown, else back to the previous screen"),
    Binding("left_square_bracket", "prev_turn", "Prev turn", id="session.prev_turn", tooltip="Select the previous turn",
            group=_TURN_GROUP),
    Binding("right_square_bracket", "next_turn", "Next turn", id="session.next_turn", tooltip="Select the next turn",
            group=_TURN_GROUP),
    Binding("n", "next_error", "Next error", id="session.next_error",
            tooltip="Move the cursor to the next halted statement or error cell", group=_ERROR_GROUP),
    Binding("N", "prev_error", "Prev error", id="session.prev_error",
            tooltip="Move the cursor to the previous halted statement or error cell", group=_ERROR_GROUP),
    Binding("o", "observations", "Observations", id="session.observations",
            tooltip="Show / hide the turn's observations"),
    Binding("p", "agent_loop", "Agent loop", show=False, id="session.agent_loop",
            tooltip="Show / hide the agent-loop program the turn ran (agent-loops/<sha>.flux)"),
    Binding("c", "conversation", "Conversation", show=False, id="session.conversation",
            tooltip="Show the conversation"),
    Binding("a", "conversation_scope", "Turn/all", show=False, id="session.conversation_scope",
            tooltip="Conversation: this turn only, or the whole session"),
    Binding("e", "unknown_events", "Unknown events", show=False, id="session.unknown",
            tooltip="Events of kinds this reader does not know"),
    Binding("l", "lineage", "Lineage", id="session.lineage", tooltip="Forks, what-ifs and sub-agents of this session"),
    Binding("u", "source", "Source", id="session.source", tooltip="Open the session this one was derived from"),
    Binding("r", "replay", "Replay", id="session.replay",
            tooltip="Replay the session hermetically from its cassette and mark every statement and cell"),
    Binding("d", "diff", "Diff", id="session.diff",
            tooltip="Diff this session against another one, side by side (default: its fork source)"),
    Binding("Y", "copy_hash", "Copy hash", show=False, id="session.copy_hash",
            tooltip="Copy the hash of the item under the cursor (input_hash / stmt_hash)"),
    Binding("less_than_sign", "split(-1)", "Narrower turns", show=False, id="session.split_narrower",
            tooltip="Move the split left: a narrower turns column (down to hidden)"),
    Binding("greater_than_sign", "split(1)", "Wider turns", show=False, id="session.split_wider",
            tooltip="Move the split right: a wider turns column"),
    Binding("C", "save_case", "Save case", show=False, id="session.save_case",
            tooltip="Save a case of this turn forked at the statement under the plan cursor (hash copied)"),
    Binding("R", "resurrect", "Resurrect", id="session.resurrect",
            tooltip="Finish the interrupted turn from the crash point, from tape (the gate first if anything runs live)"),
    Binding("f", "fork", "Fork", id="session.fork",
            tooltip="Fork the session at the statement under the plan cursor (inject, edit or re-plan)"),
    Binding("w", "what_if", "What-if", id="session.what_if",
            tooltip="What if the cell (or statement) under the cursor had returned something else, or the policy "
                    "were different: re-run the session offline into a new session and diff it"),
    Binding("slash", "search", "Search", id="session.search",
            tooltip="Search the session: this turn's plan text, cell ops, inputs and contents and conversation, "
                    "then the other turns' cells (n/N step)"),
    Binding("colon", "jump", "Jump", id="session.jump",
            tooltip="Jump to turn N, statement N (s3) or cell N (c7)"),
    Binding("y", "copy", "Copy", id="session.copy",
            tooltip="Copy what is under the cursor: a cell's content, a statement's source, a turn's input; in "
                    "the inspector or a tab, the text it shows"),
    Binding("z", "zoom", "Zoom", id="session.zoom",
            tooltip="Maximise the focused panel (z again restores the layout)"),
    Binding("1", "focus_panel('turns')", "Focus turns", show=False, id="session.focus_turns", tooltip="Focus the turn list"),
    Binding("2", "focus_panel('timeline')", "Focus plan", show=False, id="session.focus_timeline",
            tooltip="Focus the plan / cell stepper"),
    Binding("3", "focus_panel('inspector')", "Focus inspector", show=False, id="session.focus_inspector",
            tooltip="Focus the inspector"),
    Binding("4", "focus_panel('bottom')", "Focus conversation", show=False, id="session.focus_bottom",
            tooltip="Focus the conversation / observations panel"),
]
