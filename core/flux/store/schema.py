"""The DDL of a flux ``Storage::dir`` (events.db and flow.db, see docs/store-format.md), byte-for-byte the statements flux runs."""

EVENTS_DDL = """
CREATE TABLE IF NOT EXISTS events (
                 global_seq     INTEGER PRIMARY KEY AUTOINCREMENT,
                 stream         TEXT    NOT NULL,
                 stream_seq     INTEGER NOT NULL,
                 id             TEXT    NOT NULL,
                 kind           TEXT    NOT NULL,
                 schema_version INTEGER NOT NULL DEFAULT 1,
                 ts             INTEGER NOT NULL,
                 payload        TEXT    NOT NULL,
                 turn_id        INTEGER,
                 UNIQUE(id),
                 UNIQUE(stream, stream_seq)
             );
CREATE INDEX IF NOT EXISTS idx_events_stream_kind ON events(stream, kind, stream_seq);
CREATE INDEX IF NOT EXISTS idx_events_kind ON events(kind);
CREATE INDEX IF NOT EXISTS idx_events_turn ON events(stream, turn_id) WHERE turn_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS streams (
                 n          INTEGER PRIMARY KEY AUTOINCREMENT,
                 model      TEXT    NOT NULL DEFAULT '',
                 created_at INTEGER NOT NULL,
                 updated_at INTEGER NOT NULL,
                 last_seq   INTEGER NOT NULL DEFAULT -1,
                 msg_count  INTEGER NOT NULL DEFAULT 0
             );
"""

# Runs after the context columns exist.
STREAMS_INDEX_DDL = "CREATE INDEX IF NOT EXISTS idx_streams_account ON streams(account);"


# Added by migration when PRAGMA table_info shows them missing (why the fixture's DDL ends with them).
CONTEXT_COLUMNS = ("account", "agent_id", "agent_version", "correlation_id")

FLOW_DDL = """
CREATE TABLE IF NOT EXISTS values_store (
  n          INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  data       TEXT NOT NULL,
  bytes      INTEGER NOT NULL,
  created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS symbols (
  session_id TEXT NOT NULL, name TEXT NOT NULL, value_id TEXT NOT NULL,
  ty TEXT, summary TEXT NOT NULL,
  visibility TEXT NOT NULL,
  updated_at INTEGER NOT NULL, PRIMARY KEY (session_id, name));
CREATE TABLE IF NOT EXISTS suspensions (
  session_id TEXT PRIMARY KEY,
  flow_name TEXT,
  body TEXT NOT NULL,
  node INTEGER NOT NULL,
  source TEXT NOT NULL,
  created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS session_composites (
  session_id TEXT NOT NULL, name TEXT NOT NULL, source TEXT NOT NULL,
  updated_at INTEGER NOT NULL, PRIMARY KEY (session_id, name));
"""

# Event kinds that never carry a turn_id; here so the writer checks it without importing
# the event model (flux.store.events re-exports it).
UNSCOPED_KINDS = frozenset({"session_started", "model_changed", "message", "compacted", "run", "turn_started"})
