"""The bundle's canonical form and hash, and its reader against hostile input (hypothesis)."""

from __future__ import annotations

import gzip
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.cases import Bundle, CaseRefusal, MemoryStore, capture_case, decode_bundle
from flux.cases.bundle import compress, readable_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)

_BASE: dict = {}


def base(recorded_master) -> Bundle:
    if "b" not in _BASE:
        _BASE["b"] = capture_case(recorded_master, "s_1", at=1)
    return _BASE["b"]


def test_hash_is_sha256_of_the_canonical_bytes(recorded_master):
    import hashlib

    b = base(recorded_master)
    assert b.hash == hashlib.sha256(b.data).hexdigest()
    assert b.data == json.dumps(json.loads(b.data), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    keys = [(r["kind"], r["key"]) for r in json.loads(b.data)["results"]]
    assert keys == sorted(keys)


@settings(max_examples=80, deadline=None)
@given(extra=json_values, shuffle=st.randoms(use_true_random=False), indent=st.sampled_from([None, 1, 4]))
def test_the_hash_ignores_layout_key_order_and_result_order(recorded_master, extra, shuffle, indent):
    b = base(recorded_master)
    obj = json.loads(b.data)
    obj["manifest"]["inputs"]["extra"] = extra
    one = Bundle.build(obj["manifest"], obj["history"], list(obj["results"]))
    results = list(obj["results"])
    shuffle.shuffle(results)
    relaid = {"results": results, "history": obj["history"], "manifest": dict(reversed(list(obj["manifest"].items())))}
    text = json.dumps(relaid, indent=indent, ensure_ascii=bool(shuffle.getrandbits(1)))
    two = decode_bundle(text.encode())
    assert two.hash == one.hash
    assert decode_bundle(compress(one.data)).hash == one.hash
    assert decode_bundle(readable_json(one)).hash == one.hash
    # A changed value changes the hash.
    obj["manifest"]["inputs"]["extra"] = [extra]
    assert Bundle.build(obj["manifest"], obj["history"], obj["results"]).hash != one.hash


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_hostile_truncated_and_corrupt_bytes_refuse_in_one_line_and_write_nothing(recorded_master, data):
    b = base(recorded_master)
    blob = data.draw(st.sampled_from([compress(b.data), b.data, readable_json(b)]))
    how = data.draw(st.sampled_from(["truncate", "flip", "insert", "random", "gzip-random"]))
    if how == "truncate":
        bad = blob[: data.draw(st.integers(0, len(blob) - 1))]
    elif how == "flip":
        i = data.draw(st.integers(0, len(blob) - 1))
        bad = blob[:i] + bytes([blob[i] ^ data.draw(st.integers(1, 255))]) + blob[i + 1:]
    elif how == "insert":
        i = data.draw(st.integers(0, len(blob)))
        bad = blob[:i] + data.draw(st.binary(min_size=1, max_size=8)) + blob[i:]
    elif how == "random":
        bad = data.draw(st.binary(max_size=200))
    else:
        bad = gzip.compress(data.draw(st.binary(max_size=200)))
    store = MemoryStore()
    try:
        got = store.put_blob(bad)[0]
    except CaseRefusal as e:
        assert e.code in ("bundle_corrupt", "format_unsupported")
        assert "\n" not in e.message
        assert store.list() == []
        return
    # A change the reader accepts (whitespace, an equivalent escape…) is a valid bundle; it is kept
    # under the hash of what it now holds, and reads back whole.
    assert store.get(got.hash).data == got.data


@settings(max_examples=60, deadline=None)
@given(obj=json_values)
def test_any_json_value_that_is_not_a_bundle_is_corrupt(obj):
    try:
        decode_bundle(json.dumps(obj).encode())
    except CaseRefusal as e:
        assert e.code == "bundle_corrupt"
    else:  # pragma: no cover - a random value is never a valid bundle
        raise AssertionError("accepted a non-bundle")


def test_a_gzip_bomb_is_refused_before_it_is_inflated(monkeypatch):
    monkeypatch.setenv("FLUX_CASE_MAX_BYTES", "100000")
    bomb = gzip.compress(b" " * 5_000_000)
    try:
        decode_bundle(bomb)
    except CaseRefusal as e:
        assert e.code == "bundle_corrupt" and "size limit" in e.message
    else:
        raise AssertionError("inflated a bomb")


def test_a_bundle_over_the_size_limit_is_refused_at_save(recorded, monkeypatch, tmp_path):
    from flux.cases import save_case

    monkeypatch.setenv("FLUX_CASE_MAX_BYTES", "1000")
    st_ = MemoryStore()
    try:
        save_case(recorded, "s_1", fixture_store=st_)
    except CaseRefusal as e:
        assert e.code == "bundle_too_large"
    else:
        raise AssertionError("saved an oversized bundle")
    assert st_.list() == []
    monkeypatch.delenv("FLUX_CASE_MAX_BYTES")
    assert save_case(recorded, "s_1", fixture_store=st_).stored
