"""Read models over a session's events."""
