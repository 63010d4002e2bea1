"""Time-machine verbs: ``flux replay``, ``flux diff`` (being written)."""

from . import main  # noqa: F401
