"""Read models over a session's events (spec §3)."""
