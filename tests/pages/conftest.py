"""Stores for the review-page tests: the demo store, and a copy of it whose rows carry planted
secrets the recorder never saw (written past it, straight into events.db)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

#: Secrets of three kinds: credential shapes the redactor knows, and a value only the environment
#: names as secret (``DEPLOY_PASSWORD``), planted in the prompt, a tool output and a plan.
SHAPED = ("sk-ant-PLANTEDSECRET0123456789", "AKIAPLANTED000000000", "ghp_PLANTEDplantedPLANTED1234")
ENV_NAME, ENV_VALUE = "DEPLOY_PASSWORD", "plain-value-from-env-7731"
PLANTED = SHAPED + (ENV_VALUE,)


def _plant(text: str, marker: str, extra: str) -> str:
    return text.replace(marker, marker + " " + extra, 1)


@pytest.fixture
def secret_store(demo: Path) -> Path:
    """The demo store with secrets in s_1's prompt and first message, a cell's content and a plan
    source (all JSON-string values, so every row still decodes)."""
    con = sqlite3.connect(demo / "events.db")
    rows = con.execute("SELECT global_seq, kind, payload FROM events WHERE stream = 's_1' ORDER BY global_seq").fetchall()
    done = set()
    for seq, kind, payload in rows:
        body = json.loads(payload)
        text = json.dumps(body, ensure_ascii=False)
        new = text
        if kind == "turn_started" and "prompt" not in done:
            new = _plant(text, "the tokenizer test fails", f"{SHAPED[0]} {ENV_VALUE}")
            done.add("prompt")
        elif kind == "message" and "message" not in done and "the tokenizer test fails" in text:
            new = _plant(text, "the tokenizer test fails", SHAPED[0])
            done.add("message")
        elif kind == "run" and '"op_recorded"' in text and "2 passed" in text and "cell" not in done:
            new = _plant(text, "2 passed", f"{SHAPED[1]} {ENV_VALUE}")
            done.add("cell")
        elif kind == "plan_attempted" and '\\"path\\":\\"tests\\"' in text and "plan" not in done:
            new = text.replace('\\"path\\":\\"tests\\"', f'\\"path\\":\\"tests {SHAPED[2]}\\"', 1)
            done.add("plan")
        if new != text:
            con.execute("UPDATE events SET payload = ? WHERE global_seq = ?",
                        (json.dumps(json.loads(new), ensure_ascii=False, separators=(",", ":")), seq))
    con.commit()
    con.close()
    assert done == {"prompt", "message", "cell", "plan"}, done
    return demo


@pytest.fixture
def pages_dir(tmp_path: Path) -> Path:
    d = tmp_path / "pages"
    d.mkdir()
    return d


def copy_store(src: Path, dst: Path) -> Path:
    return Path(shutil.copytree(src, dst))
