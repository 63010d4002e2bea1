"""The case bundle (format 1): its canonical bytes, its hash, compression, and validation.

A bundle is one JSON object (``manifest``, ``history``, ``results``; docs/cases.md), hashed over its
canonical bytes and stored gzip-compressed deterministically. :func:`decode_bundle` reads the
compressed or the indented JSON form and refuses anything else with ``bundle_corrupt`` (or
``format_unsupported``): a hostile file is one refusal, never a traceback.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass
from typing import Any

from ..canonical import canonical_json, sha256_hex
from .errors import CaseRefusal

__all__ = [
    "FORMAT", "KINDS", "DEFAULT_MAX_BYTES", "Bundle", "canonical_bytes", "bundle_hash", "compress", "decode_bundle",
    "is_hash", "check_hash", "max_bundle_bytes", "readable_json",
]

FORMAT = 1
KINDS = ("agent", "flow")
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
_HASH = re.compile(r"[0-9a-f]{64}")
_KEY = re.compile(r"0|[1-9][0-9]{0,11}")  # a call number, written one way only
_GZIP_MAGIC = b"\x1f\x8b"


def max_bundle_bytes() -> int:
    """The size limit on a bundle's canonical bytes: ``FLUX_CASE_MAX_BYTES``, else 512 MiB."""
    raw = os.environ.get("FLUX_CASE_MAX_BYTES")
    if raw is None or not raw.strip():
        return DEFAULT_MAX_BYTES
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n <= 0:
        raise CaseRefusal("invalid_overrides", f"FLUX_CASE_MAX_BYTES={raw!r} is not a positive byte count — "
                                               f"unset it or give a number such as 536870912")
    return n


def is_hash(text: Any) -> bool:
    return isinstance(text, str) and _HASH.fullmatch(text) is not None


def check_hash(text: str, code: str = "invalid_fixture_hash") -> str:
    if not is_hash(text):
        raise CaseRefusal(code, f"{text!r} is not a case hash — give the 64 lowercase hex digits "
                                f"`flux case list` shows")
    return text


def _sort_results(results: list[dict]) -> list[dict]:
    return sorted(results, key=lambda r: (r["kind"], r["key"]))


@dataclass(frozen=True)
class Bundle:
    """A validated bundle: its three parts, its canonical bytes and their hash."""

    manifest: dict
    history: list
    results: list
    data: bytes  # the canonical uncompressed bytes
    hash: str

    @classmethod
    def build(cls, manifest: dict, history: list, results: list) -> "Bundle":
        """A bundle from its parts (validated: the builder's own output passes the same checks
        an imported file does)."""
        obj = {"manifest": manifest, "history": history, "results": _sort_results(results)}
        validate(obj)
        data = canonical_bytes(obj)
        return cls(obj["manifest"], obj["history"], obj["results"], data, sha256_hex(data))

    @property
    def size(self) -> int:
        return len(self.data)

    def to_obj(self) -> dict:
        return {"manifest": self.manifest, "history": self.history, "results": self.results}

    def summary(self) -> dict:
        """What ``list`` and ``save`` print: the manifest's headline and counts."""
        m = self.manifest
        return {"format": m["format"], "kind": m["kind"], "target_name": m["target_name"],
                "session": m["source"].get("session"), "turn": m["source"].get("turn"),
                "fork_at": m["fork"]["at"], "fork_after_seq": m["fork"]["fork_after_seq"], "capture": m["capture"],
                "result_count": len(self.results), "history_count": len(self.history), "size": self.size}

    def ops(self) -> list[dict]:
        """The op results in call order (by their numeric key)."""
        return sorted((r for r in self.results if r["kind"] == "op"), key=lambda r: int(r["key"]))

    def model_calls(self) -> list[dict]:
        return sorted((r for r in self.results if r["kind"] == "model"), key=lambda r: int(r["key"]))


def canonical_bytes(obj: Any) -> bytes:
    """Sorted keys, compact separators, UTF-8 (a lone surrogate cannot be encoded: corrupt)."""
    try:
        return canonical_json(obj).encode("utf-8")
    except UnicodeEncodeError:
        raise CaseRefusal("bundle_corrupt", "the bundle holds text that is not valid Unicode (a lone surrogate) — "
                                            "re-export it from its fixture store") from None


def bundle_hash(obj: Any) -> str:
    return sha256_hex(canonical_bytes(obj))


def compress(data: bytes) -> bytes:
    """Deterministic gzip: the same bytes always compress to the same blob."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def readable_json(bundle: Bundle) -> bytes:
    """The diffable export: indented, keys sorted, UTF-8, one trailing newline."""
    return (json.dumps(bundle.to_obj(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _inflate(blob: bytes, limit: int) -> bytes:
    """gzip-decompress at most ``limit`` bytes; a bomb, a truncated or damaged stream, or trailing
    garbage is corrupt."""
    out = []
    total = 0
    rest = blob
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(rest, limit + 1 - total)
            while d.unconsumed_tail and total + len(chunk) <= limit:
                out.append(chunk)
                total += len(chunk)
                chunk = d.decompress(d.unconsumed_tail, limit + 1 - total)
        except zlib.error as e:
            raise CaseRefusal("bundle_corrupt", f"the bundle does not decompress ({e}) — re-export it") from None
        out.append(chunk)
        total += len(chunk)
        if total > limit:
            raise CaseRefusal("bundle_corrupt", f"the bundle decompresses to more than {limit} bytes, the size "
                                                f"limit — re-export it, or raise FLUX_CASE_MAX_BYTES")
        if not d.eof:
            raise CaseRefusal("bundle_corrupt", "the compressed bundle is truncated — re-export it")
        rest = d.unused_data
        if rest and not rest.startswith(_GZIP_MAGIC):
            raise CaseRefusal("bundle_corrupt", "the compressed bundle has trailing bytes — re-export it")
    return b"".join(out)


def decode_bundle(blob: bytes, *, expect_hash: str | None = None) -> Bundle:
    """Read a stored, exported or imported bundle: gzip or JSON. With ``expect_hash`` (a blob
    read from a store under that name) the canonical bytes must hash to it."""
    if not isinstance(blob, (bytes, bytearray)):
        raise CaseRefusal("bundle_corrupt", "a bundle is bytes")
    limit = max_bundle_bytes()
    raw = _inflate(bytes(blob), limit) if blob[:2] == _GZIP_MAGIC else bytes(blob)
    if len(raw) > limit:
        raise CaseRefusal("bundle_corrupt", f"the bundle is over the size limit ({limit} bytes)")
    try:
        obj = json.loads(raw.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise CaseRefusal("bundle_corrupt", "the bundle nests too deeply to be a bundle — re-export it") from None
    except (UnicodeDecodeError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CaseRefusal("bundle_corrupt", f"the bundle is not JSON ({first}) — re-export it") from None
    validate(obj)
    if expect_hash is not None and sha256_hex(raw) == expect_hash:
        # A stored blob is the canonical bytes themselves: their hash is the name, nothing to redo.
        return Bundle(obj["manifest"], obj["history"], obj["results"], raw, expect_hash)
    obj["results"] = _sort_results(obj["results"])
    data = canonical_bytes(obj)
    h = sha256_hex(data)
    if expect_hash is not None and h != expect_hash:
        raise CaseRefusal("bundle_corrupt", f"the bytes stored as {expect_hash[:16]}… hash to {h[:16]}… — the "
                                            f"stored bundle was changed or damaged; re-import it")
    return Bundle(obj["manifest"], obj["history"], obj["results"], data, h)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    v = float(text)
    if v in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is out of range")
    return v


# -- validation ------------------------------------------------------------------------------------


def _corrupt(where: str, what: str) -> CaseRefusal:
    return CaseRefusal("bundle_corrupt", f"the bundle's {where} {what} — re-export it from its fixture store")


def _need(obj: dict, key: str, types: type | tuple, where: str) -> Any:
    if key not in obj:
        raise _corrupt(where, f"has no {key!r}")
    v = obj[key]
    if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise _corrupt(where, f"{key!r} has the wrong type")
    if not isinstance(v, types):
        raise _corrupt(where, f"{key!r} has the wrong type")
    return v


def validate(obj: Any) -> None:
    """Every structural rule of format 1 (raises ``bundle_corrupt`` / ``format_unsupported``)."""
    if not isinstance(obj, dict):
        raise CaseRefusal("bundle_corrupt", "the bundle is not a JSON object — re-export it")
    if set(obj) != {"manifest", "history", "results"}:
        raise CaseRefusal("bundle_corrupt", f"a bundle has exactly the keys manifest, history and results, this one "
                                            f"{sorted(obj)[:6]} — re-export it")
    m = obj["manifest"]
    if not isinstance(m, dict):
        raise _corrupt("manifest", "is not an object")
    fmt = m.get("format")
    if type(fmt) is not int:
        raise _corrupt("manifest", "has no integer format")
    if fmt != FORMAT:
        raise CaseRefusal("format_unsupported", f"the bundle is format {fmt}; this version reads format {FORMAT} — "
                                                f"upgrade flux-tui or re-save the case")
    kind = m.get("kind")
    if kind not in KINDS:
        raise CaseRefusal("format_unsupported", f"the bundle's kind {kind!r} is not one this version runs "
                                                f"({', '.join(KINDS)}) — upgrade flux-tui or re-save the case")
    _need(m, "target_name", str, "manifest")
    _need(m, "product_version", str, "manifest")
    _need(m, "code_version", (str, type(None)), "manifest")
    src = _need(m, "source", dict, "manifest")
    _need(src, "session", str, "source")
    _need(src, "turn", int, "source")
    fork = _need(m, "fork", dict, "manifest")
    for k in ("at", "fork_after_seq", "prefix_model_calls"):
        if _need(fork, k, int, "fork") < 0:
            raise _corrupt("fork", f"{k!r} is negative")
    cap = _need(m, "capture", dict, "manifest")
    _need(cap, "complete", bool, "capture")
    for k in ("missing", "truncated"):
        if not all(isinstance(x, str) for x in _need(cap, k, list, "capture")):
            raise _corrupt("capture", f"{k!r} is not a list of strings")
    inputs = _need(m, "inputs", dict, "manifest")
    _need(inputs, "input", str, "inputs")
    reg = _need(m, "registration", dict, "manifest")
    for t in _need(reg, "tools", list, "registration"):
        if not isinstance(t, dict):
            raise _corrupt("registration", "lists a tool that is not an object")
        _need(t, "name", str, "registration tool")
        _need(t, "effect", str, "registration tool")
        _need(t, "writes", bool, "registration tool")
    _need(m, "recorded_config", dict, "manifest")
    hist = obj["history"]
    if not isinstance(hist, list):
        raise _corrupt("history", "is not a list")
    for ev in hist:
        if not isinstance(ev, dict):
            raise _corrupt("history", "holds a row that is not an object")
        _need(ev, "global_seq", int, "history row")
        _need(ev, "kind", str, "history row")
        if ev["global_seq"] > fork["fork_after_seq"]:
            raise _corrupt("history", "holds a row after the fork point")
    results = obj["results"]
    if not isinstance(results, list):
        raise _corrupt("results", "is not a list")
    seen: set[tuple[str, str]] = set()
    for r in results:
        if type(r) is not dict:
            raise _corrupt("results", "hold an entry that is not an object")
        k, key, fp = r.get("kind"), r.get("key"), r.get("fingerprint")
        if type(k) is not str or type(key) is not str or type(fp) is not str:
            raise _corrupt("results", "hold an entry without a string kind, key and fingerprint")
        if k not in ("op", "model") or not _KEY.fullmatch(key):
            raise _corrupt("results", f"hold an entry {k[:10]}:{key[:20]} of an unknown kind or key")
        if (k, key) in seen:
            raise _corrupt("results", f"hold {k}:{key} twice")
        seen.add((k, key))
        has_result, has_error = "result" in r, "error" in r
        if has_result == has_error:
            raise _corrupt("results", f"entry {k}:{key} has neither or both of result and error")
        body = r["result"] if has_result else r["error"]
        if type(body) is not dict:
            raise _corrupt("results", f"entry {k}:{key} has a result that is not an object")
        if k == "op":
            if type(r.get("op")) is not str or type(body.get("content")) is not str:
                raise _corrupt("op result", f"{key} has no string op or content")
        else:
            chunks = body.get("chunks")
            if type(chunks) is not list:
                raise _corrupt("model result", f"{key} has no chunk list")
            for c in chunks:
                if type(c) is not dict or type(c.get("t")) is not str:
                    raise _corrupt("model result", f"{key} holds a chunk that is not {{t, c}}")
