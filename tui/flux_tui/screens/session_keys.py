"""The session screen's keys, with their ids (a user keymap remaps them) and tooltips (F1 lists them)."""

from __future__ import annotations

from ..keys import key_table

__all__ = ["SESSION_BINDINGS"]

SESSION_BINDINGS = key_table("session", """
    # keys                id                  action                    label
    escape                back                back                      Back
        Clear the replay marks if shown, else back to the previous screen
    left_square_bracket   prev_turn           prev_turn                 Prev turn  [group Turn]
        Select the previous turn
    right_square_bracket  next_turn           next_turn                 Next turn  [group Turn]
        Select the next turn
    n                     next_error          next_error                Next error  [group Error]
        Move the cursor to the next halted statement or error cell
    N                     prev_error          prev_error                Prev error  [group Error]
        Move the cursor to the previous halted statement or error cell
    o                     observations        observations              Observations
        Show / hide the turn's observations
    p                     agent_loop          agent_loop                Agent loop  [hidden]
        Show / hide the agent-loop program the turn ran (agent-loops/<sha>.flux)
    c                     conversation        conversation              Conversation  [hidden]
        Show the conversation
    a                     conversation_scope  conversation_scope        Turn/all  [hidden]
        Conversation: this turn only, or the whole session
    e                     unknown             unknown_events            Unknown events  [hidden]
        Events of kinds this reader does not know
    l                     lineage             lineage                   Lineage
        Forks, what-ifs and sub-agents of this session
    u                     source              source                    Source
        Open the session this one was derived from
    r                     replay              replay                    Replay
        Replay the session hermetically from its cassette and mark every statement and cell
    d                     diff                diff                      Diff
        Diff this session against another one, side by side (default: its fork source)
    Y                     copy_hash           copy_hash                 Copy hash  [hidden]
        Copy the hash of the item under the cursor (input_hash / stmt_hash)
    less_than_sign        split_narrower      split(-1)                 Narrower turns  [hidden]
        Move the split left: a narrower turns column (down to hidden)
    greater_than_sign     split_wider         split(1)                  Wider turns  [hidden]
        Move the split right: a wider turns column
    C                     save_case           save_case                 Save case  [hidden]
        Save a case of this turn forked at the statement under the plan cursor (hash copied)
    R                     resurrect           resurrect                 Resurrect
        Finish the interrupted turn from the crash point, from tape (the gate first if anything runs live)
    f                     fork                fork                      Fork
        Fork the session at the statement under the plan cursor (inject, edit or re-plan)
    w                     what_if             what_if                   What-if
        What if the cell (or statement) under the cursor had returned something else, or the policy were
        different: re-run the session offline into a new session and diff it
    slash                 search              search                    Search
        Search the session: this turn's plan text, cell ops, inputs and contents and conversation, then the
        other turns' cells (n/N step)
    colon                 jump                jump                      Jump
        Jump to turn N, statement N (s3) or cell N (c7)
    y                     copy                copy                      Copy
        Copy what is under the cursor: a cell's content, a statement's source, a turn's input; in the
        inspector or a tab, the text it shows
    z                     zoom                zoom                      Zoom
        Maximise the focused panel (z again restores the layout)
    1                     focus_turns         focus_panel('turns')      Focus turns  [hidden]
        Focus the turn list
    2                     focus_timeline      focus_panel('timeline')   Focus plan  [hidden]
        Focus the plan / cell stepper
    3                     focus_inspector     focus_panel('inspector')  Focus inspector  [hidden]
        Focus the inspector
    4                     focus_bottom        focus_panel('bottom')     Focus conversation  [hidden]
        Focus the conversation / observations panel
""")
