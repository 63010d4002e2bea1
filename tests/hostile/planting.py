"""Plant secrets of every shape in a real recorded run and a recorded scenario, then grep every
byte written for them.

:func:`make_planting` draws secrets — registered ones (through an environment variable whose name
declares a secret, as the CLI registers them) holding quotes, backslashes, tabs and non-ASCII, and
pattern-detected ones (``AKIA…``, ``ghp_…``, ``AIza…``, ``sk-…``, ``api_key: VALUE``,
``DB_PASSWORD='…'``, ``password = "…"``, ``Bearer …``, a URL password) — and places each one in a prompt, a tool input (streamed
in ``tool_input_delta`` pieces cut inside the secret), a tool output (a workspace file the agent
reads) or the model's text (streamed in ``text_delta`` pieces cut inside the secret), at a line
start, after a tab or mid-sentence.

:func:`run_planting` records it for real through the CLI, in-process: ``flux run`` with a
scripted model and ``--model-cassette``, ``flux record`` of a scenario, ``flux show`` (text and
``--json``), ``flux export`` (ATIF, to stdout and to a file), ``flux replay``, ``flux test`` and a
judge verdict recorded into ``judge.jsonl``. It then greps every file under the store and the
scenario directory and every stdout/stderr for each secret in UTF-8, JSON-escaped (with and without
``\\uXXXX``), doubly JSON-escaped and TOML-escaped forms, and for its fragments (so a secret cut in
two and kept in two chunks is found too). The benchmark ``benchmarks/hostile_secrets.py`` and the
property test ``tests/hostile/test_secrets_every_surface.py`` both run it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
NON_ASCII = "éßжü日本ñø"
# (shape, registered?) — the shapes a planted secret takes
SHAPES = ("registered", "AKIA", "ghp_", "AIza", "sk-", "api_key: VALUE", "DB_PASSWORD='…'", 'password = "…"',
          "Bearer …", "scheme://user:PASS@host")
PLACES = ("prompt", "tool input", "tool output", "model text")
CONTEXTS = ("line start", "after tab", "mid-sentence")
FRAGMENT = 8  # a leaked fragment this long (at stride 4) counts as a leak


@dataclass
class Planted:
    shape: str
    place: str
    context: str
    text: str  # what is written into the prompt / input / output / answer
    secret: str  # what must not survive
    core: str  # its random part, whose fragments must not survive either


@dataclass
class Planting:
    planted: list[Planted]
    env: dict[str, str]  # registered secrets, as environment variables naming a secret
    seed: int

    def in_place(self, place: str) -> list[Planted]:
        return [p for p in self.planted if p.place == place]


@dataclass
class Findings:
    planted: int = 0
    leaked: set = field(default_factory=set)  # indices of planted secrets found anywhere
    by_surface: dict = field(default_factory=dict)  # surface -> set of indices found there
    by_shape: dict = field(default_factory=dict)  # shape -> set of indices leaked
    examples: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # verbs that failed (a planting that did not record)

    def add(self, other: "Findings", offset: int) -> None:
        self.planted += other.planted
        self.leaked |= {i + offset for i in other.leaked}
        for k, v in other.by_surface.items():
            self.by_surface.setdefault(k, set()).update(i + offset for i in v)
        for k, v in other.by_shape.items():
            self.by_shape.setdefault(k, set()).update(i + offset for i in v)
        self.examples.extend(other.examples[: max(0, 20 - len(self.examples))])
        self.errors.extend(other.errors)


def _rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _decorate(rng: random.Random, core: str, specials: str) -> str:
    """``core`` with 1–3 of ``specials`` inserted at random inner positions (runs of ≥ 8 kept)."""
    out = core
    for _ in range(rng.randint(1, 3)):
        at = rng.choice([8, 16, 24])
        at = min(at, len(out))
        out = out[:at] + rng.choice(specials) + out[at:]
    return out


def _secret(rng: random.Random, shape: str, index: int, env: dict[str, str]) -> tuple[str, str, str]:
    """``(text to plant, secret, random core)`` of one shape."""
    if shape == "registered":
        core = _rand(rng, ALNUM, 32)
        value = _decorate(rng, core, '"\\\t' + NON_ASCII + "'{}$")
        env[f"PLANTED{index}_API_KEY"] = value
        return value, value, core
    if shape == "AKIA":
        core = _rand(rng, UPPER_DIGITS, 16)
        return "AKIA" + core, "AKIA" + core, core
    if shape == "ghp_":
        core = _rand(rng, ALNUM, 36)
        return "ghp_" + core, "ghp_" + core, core
    if shape == "AIza":
        core = _rand(rng, ALNUM + "_-", 35)
        return "AIza" + core, "AIza" + core, core
    if shape == "sk-":
        core = _rand(rng, ALNUM, 32)
        return "sk-" + core, "sk-" + core, core
    if shape == "api_key: VALUE":
        core = _rand(rng, ALNUM, 24)
        value = _decorate(rng, core, NON_ASCII)
        sep = rng.choice([": ", ":\t", "=", " = ", ":"])
        name = rng.choice(["api_key", "API_KEY", "client_secret", "GITHUB_TOKEN", "db.passwd"])
        return f"{name}{sep}{value}", value, core
    if shape == "DB_PASSWORD='…'":
        core = _rand(rng, ALNUM, 24)
        value = _decorate(rng, core, '"\\\t ' + NON_ASCII)
        return f"DB_PASSWORD='{value}'", value, core
    if shape == 'password = "…"':
        core = _rand(rng, ALNUM, 24)
        value = _decorate(rng, core, "'\t " + NON_ASCII + '|').replace("|", '\\"')  # \" : an escaped quote
        return f'password = "{value}"', value, core
    if shape == "Bearer …":
        core = _rand(rng, ALNUM, 28)
        return f"Authorization: Bearer {core}", core, core
    if shape == "scheme://user:PASS@host":
        core = _rand(rng, ALNUM, 20)
        return f"postgres://deploy:{core}@db.internal:5432/app", core, core
    raise ValueError(shape)


def _in_context(rng: random.Random, text: str, context: str) -> str:
    word = _rand(rng, string.ascii_lowercase, 5)
    if context == "line start":
        return f"{word} one\n{text}\n{word} two"
    if context == "after tab":
        return f"{word}\t{text}\tend"
    return f"see {text} now"


def make_planting(seed: int, n: int) -> Planting:
    """``n`` secrets on a fresh seed, every shape, place and context in turn (then at random)."""
    rng = random.Random(seed)
    env: dict[str, str] = {}
    planted = []
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)] if i < len(SHAPES) else rng.choice(SHAPES)
        place = PLACES[(i // len(SHAPES)) % len(PLACES)] if i < len(SHAPES) * len(PLACES) else rng.choice(PLACES)
        context = rng.choice(CONTEXTS)
        text, secret, core = _secret(rng, shape, i, env)
        planted.append(Planted(shape, place, context, _in_context(rng, text, context), secret, core))
    return Planting(planted, env, seed)


def _cut(rng: random.Random, text: str, inside: list[str]) -> list[str]:
    """``text`` in 2–4 pieces, one cut in the middle of each ``inside`` string where it occurs."""
    cuts = set()
    for s in inside:
        at = text.find(s)
        if at >= 0:
            cuts.add(at + len(s) // 2)
    for _ in range(rng.randint(0, 2)):
        cuts.add(rng.randrange(len(text) + 1))
    cuts = sorted(c for c in cuts if 0 < c < len(text))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)]) if b > a]


def script_for(planting: Planting) -> list[dict]:
    """The scripted model: one response that writes every tool-input secret (its input streamed in
    pieces cut inside the secrets) and reads the file holding every tool-output secret, with the
    model-text secrets in text deltas; then the answer, repeating them."""
    rng = random.Random(planting.seed ^ 0x5EED)
    text_items = planting.in_place("model text")
    model_text = "\n".join(p.text for p in text_items) or "Working on it."
    content = "\n".join(p.text for p in planting.in_place("tool input")) or "nothing planted here"
    write_input = {"path": "planted/out.txt", "content": content}
    chunks = [{"t": "message_start", "c": {"model": "scripted"}}]
    chunks += [{"t": "text_delta", "c": piece} for piece in _cut(rng, model_text, [p.secret for p in text_items])]
    partial = json.dumps(write_input, ensure_ascii=rng.random() < 0.3)
    chunks += [{"t": "tool_input_delta", "c": {"name": "write", "partial_json": piece}}
               for piece in _cut(rng, partial, [json.dumps(p.secret)[1:-1] for p in planting.in_place("tool input")])]
    chunks.append({"t": "block", "c": {"type": "tool_use", "id": "toolu_w1", "name": "write", "input": write_input}})
    chunks.append({"t": "block", "c": {"type": "tool_use", "id": "toolu_r1", "name": "read",
                                       "input": {"path": "planted/in.txt"}}})
    chunks += [{"t": "usage", "c": {"input_tokens": 10, "output_tokens": 20}},
               {"t": "done", "c": {"stop_reason": "tool_use"}}]
    answer = "Done.\n" + model_text
    final = [{"t": "message_start", "c": {"model": "scripted"}}]
    final += [{"t": "text_delta", "c": piece} for piece in _cut(rng, answer, [p.secret for p in text_items])]
    final += [{"t": "usage", "c": {"input_tokens": 30, "output_tokens": 5}}, {"t": "done", "c": {"stop_reason": "end_turn"}}]
    return [{"chunks": chunks}, {"chunks": final}]


def prompt_for(planting: Planting) -> str:
    items = planting.in_place("prompt")
    return "deploy the service\n" + "\n".join(p.text for p in items)


def needles(p: Planted) -> list[bytes]:
    """Every spelling of ``p.secret`` that counts as a leak, and its fragments."""
    s = p.secret
    forms = {s, json.dumps(s, ensure_ascii=False)[1:-1], json.dumps(s)[1:-1]}
    forms |= {json.dumps(f, ensure_ascii=False)[1:-1] for f in list(forms)}
    forms.add(s.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t"))  # TOML basic string
    out = {f.encode("utf-8") for f in forms}
    core = p.core
    for i in range(0, len(core) - FRAGMENT + 1, 4):
        out.add(core[i:i + FRAGMENT].encode())
    return sorted(out, key=len, reverse=True)


def oracle_misses(planting: Planting) -> list[Planted]:
    """Planted texts the redactor itself leaves a secret in (as plain text): a pattern gap, not a
    surface's — kept apart so the battery's count is of surfaces."""
    from flux.agent.client import env_secret_values
    from flux.cassette.redactor import Redactor

    r = Redactor(env_secret_values(planting.env))
    return [p for p in planting.planted if p.secret in r.redact(p.text)]


def _files(d: Path) -> list[Path]:
    return sorted(f for f in d.rglob("*") if f.is_file()) if d.exists() else []


def _invoke(main, args: list[str], env: dict[str, str], outputs: dict[str, bytes], label: str,
            findings: Findings, ok_codes=(0,)) -> int:
    res = CliRunner().invoke(main, args, env=env, catch_exceptions=True)
    outputs[f"stdout: {label}"] = res.stdout_bytes
    outputs[f"stderr: {label}"] = res.stderr_bytes
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        findings.errors.append(f"{label}: {type(res.exception).__name__}: {res.exception}")
    elif res.exit_code not in ok_codes:
        findings.errors.append(f"{label}: exit {res.exit_code}: {res.stderr.strip()[:300]}")
    return res.exit_code


def _judge(scenario_dir: Path, planting: Planting, env: dict[str, str], findings: Findings) -> None:
    """A judge verdict recorded live (FLUX_GOLDEN=update) into the scenario's ``judge.jsonl``: the
    criterion and the text under test hold the model-text secrets, and so does the verdict."""
    from flux.agent.client import env_secret_values
    from flux.agent.providers.scripted import ScriptedProvider
    from flux.cassette.redactor import Redactor
    from flux.testkit.judge import Rubric, judge
    from flux.testkit.scenario import Scenario

    text = "\n".join(p.text for p in planting.in_place("model text")) or "nothing"
    rng = random.Random(planting.seed ^ 0x1D6E)
    verdict = json.dumps({"passed": True, "rationale": "it says " + text}, ensure_ascii=False)
    chunks = [{"t": "message_start", "c": {"model": "judge"}}]
    chunks += [{"t": "text_delta", "c": p} for p in _cut(rng, verdict, [p.secret for p in planting.in_place("model text")])]
    chunks.append({"t": "done", "c": {"stop_reason": "end_turn"}})
    redactor = Redactor(env_secret_values(env))
    old = os.environ.get("FLUX_GOLDEN")
    os.environ["FLUX_GOLDEN"] = "update"
    try:
        sc = Scenario.load(scenario_dir)
        try:
            judge(sc, "mentions " + text, "the answer: " + text,
                  Rubric("scripted:judge", provider=ScriptedProvider(responses=[{"chunks": chunks}])), redactor=redactor)
        finally:
            sc.close()
    except Exception as e:  # noqa: BLE001 - the battery reports it
        findings.errors.append(f"judge: {type(e).__name__}: {e}")
    finally:
        if old is None:
            os.environ.pop("FLUX_GOLDEN", None)
        else:
            os.environ["FLUX_GOLDEN"] = old


def run_planting(planting: Planting, work: Path) -> Findings:
    """Record ``planting`` through every verb (see the module doc) in ``work``; grep every byte."""
    from flux.cli import main

    findings = Findings(planted=len(planting.planted))
    inputs = work / "inputs"  # what the user gave (the script, the seed workspace): not grepped
    ws = inputs / "workspace"
    (ws / "planted").mkdir(parents=True)
    (ws / "planted" / "in.txt").write_text("\n".join(p.text for p in planting.in_place("tool output")) or "empty\n",
                                           encoding="utf-8")
    script = inputs / "script.json"
    script.write_text(json.dumps(script_for(planting), ensure_ascii=False), encoding="utf-8")
    store = work / "store"
    scenario = work / "scenarios" / "planted"
    written = work / "written"  # files the verbs write on request (-o, --model-cassette)
    written.mkdir()
    run_ws = work / "run-workspace"  # the agent writes its tool input here: the user's own file
    shutil.copytree(ws, run_ws)
    env = {**{k: None for k in os.environ if k.startswith("FLUX_")}, **planting.env, "FLUX_AUTO_RESURRECT": "0"}
    prompt = prompt_for(planting)
    outputs: dict[str, bytes] = {}
    model = f"scripted:{script}"
    _invoke(main, ["run", "--store", str(store), "--workspace", str(run_ws), "-y", "-m", model,
                   "--model-cassette", str(written / "model.jsonl"), prompt], env, outputs, "run", findings)
    _invoke(main, ["run", "--store", str(store / "json"), "--workspace", str(run_ws), "-y", "-m", model, "--json",
                   prompt], env, outputs, "run --json", findings)
    _invoke(main, ["show", "--store", str(store), "last"], env, outputs, "show", findings)
    _invoke(main, ["show", "--store", str(store), "--json", "last"], env, outputs, "show --json", findings)
    _invoke(main, ["export", "--store", str(store), "--format", "atif", "last"], env, outputs, "export", findings)
    _invoke(main, ["export", "--store", str(store), "--format", "atif", "last", "-o", str(written / "atif.json")],
            env, outputs, "export -o", findings)
    _invoke(main, ["replay", "--store", str(store), "last"], env, outputs, "replay", findings, ok_codes=(0, 1))
    _invoke(main, ["record", "--dir", str(scenario.parent), scenario.name, prompt, "-m", model, "--workspace", str(ws),
                   "-y"], env, outputs, "record", findings)
    _invoke(main, ["record", str(scenario), prompt, "-m", model], env, outputs, "record (a bad name)", findings,
            ok_codes=(1,))  # its one-line hint echoes the prompt
    if (scenario / "scenario.toml").exists():
        _judge(scenario, planting, env, findings)
        _invoke(main, ["test", "--dir", str(scenario.parent), scenario.name], env, outputs, "test", findings,
                ok_codes=(0, 1))
        _invoke(main, ["test", "--json", "-v", str(scenario)], env, outputs, "test --json -v", findings, ok_codes=(0, 1))
        _invoke(main, ["show", "--json", str(scenario)], env, outputs, "show --json scenario", findings,
                ok_codes=(0, 1))
        _invoke(main, ["export", "--format", "atif", str(scenario)], env, outputs, "export scenario", findings)
    blobs: dict[str, bytes] = dict(outputs)
    for root in (store, scenario.parent, written):
        for f in _files(root):
            rel = f.relative_to(work)
            blobs[f"file: {_surface_name(rel)}"] = blobs.get(f"file: {_surface_name(rel)}", b"") + b"\0" + f.read_bytes()
    for i, p in enumerate(planting.planted):
        for surface, data in blobs.items():
            hit = next((nd for nd in needles(p) if nd in data), None)
            if hit is None:
                continue
            findings.leaked.add(i)
            findings.by_surface.setdefault(surface, set()).add(i)
            findings.by_shape.setdefault(p.shape, set()).add(i)
            if len(findings.examples) < 20:
                at = data.find(hit)
                findings.examples.append(f"{p.shape} in {p.place} ({p.context}) → {surface}: "
                                         f"{data[max(0, at - 40):at + len(hit) + 20]!r}")
    return findings


def _surface_name(rel: Path) -> str:
    """A file's surface: its name, with the store / scenario it belongs to."""
    parts = rel.parts
    name = parts[-1]
    if name.startswith("events.db") or name.startswith("flow.db"):
        name = name.split("-")[0]  # the -wal / -shm sidecars count with their database
    return f"{parts[0]}/{name}"
