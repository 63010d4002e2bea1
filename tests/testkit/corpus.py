"""Scenario directories recorded for real through the SDK (a scripted model, the built-in or a
user's ops), for the tests that need a particular kind of scenario: one whose ``read`` returned a
secret, one recorded with custom ops, and the differential corpus built from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from flux.agent.client import Client
from flux.agent.providers.scripted import ScriptedProvider
from flux.testkit import Scenario

SECRET = "sk-proj-abcdefghijklmnop0123456789ABCDEF"


def record_scripted(dest: Path, responses: Iterable[dict], *, input_text: str = "do the task",
                    files: Optional[dict[str, str]] = None, ops: Any = None, **kw: Any) -> Path:
    """Record one turn of ``responses`` (scripted model turns) into ``dest`` with every op approved,
    in a scratch workspace seeded with ``files``."""
    ws = dest.parent / f".{dest.name}-ws"
    ws.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (ws / name).write_text(text)
    with Client(ScriptedProvider(responses=list(responses)), workspace=ws, auto_approve=True, env_secrets=False,
                ops=ops) as c:
        Scenario.record(c, input_text, dest, **kw).close()
    return dest


def record_secret(dest: Path) -> Path:
    """A turn whose ``read`` returns a file holding an API key (the cell is stored redacted)."""
    return record_scripted(dest, [{"tool_calls": [{"name": "read", "input": {"path": "secret.env"}}]},
                                  {"text": "the key is set"}],
                           input_text="is the key set?", files={"secret.env": f"OPENAI_API_KEY={SECRET}\n"})


def record_clean(dest: Path) -> Path:
    """read a file, append a note, answer."""
    return record_scripted(dest, [{"tool_calls": [{"name": "read", "input": {"path": "README.md"}}]},
                                  {"tool_calls": [{"name": "append", "input": {"path": "note.txt", "content": "ok\n"}}]},
                                  {"text": "wrote note.txt"}],
                           input_text="read the readme and write a note", files={"README.md": "# demo\nconfig is wrong\n"})


def record_error_path(dest: Path) -> Path:
    """A turn whose provider answered 401 on call 2, kept with ``allow_error``."""
    return record_scripted(dest, [{"tool_calls": [{"name": "read", "input": {"path": "README.md"}}]},
                                  {"error": "invalid api key", "status": 401}],
                           input_text="read the readme", files={"README.md": "# demo\n"}, allow_error=True)


CUSTOM_OPS = '''
from flux.agent.ops import op


@op(effect="network")
def charge(card: str, amount: int) -> str:
    """Charge a card."""
    return f"charged {amount} to {card}"


@op(name="charge", effect="network")
def charge_twice(card: str, amount: int) -> str:
    """Charge a card, twice."""
    return f"charged {amount} to {card} twice"


OPS = [charge]
RENAMED = [charge_twice]
'''


def write_custom_ops(d: Path) -> Path:
    """A user's module of ops, ``payments_ops`` (``OPS``; ``RENAMED`` has another description)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "payments_ops.py").write_text(CUSTOM_OPS)
    return d


def record_custom_ops(dest: Path) -> Path:
    """A turn recorded with the user's ops, named ``payments_ops:OPS`` (importable by the caller)."""
    return record_scripted(dest, [{"tool_calls": [{"name": "charge", "input": {"card": "4242", "amount": 5}}]},
                                  {"text": "charged"}], input_text="charge the card", ops="payments_ops:OPS")
