"""One conformance suite, four fixture stores: memory, a directory, a real PostgreSQL server and a
real S3-compatible HTTP server (tests/servers.py starts both; one that cannot start fails here
with the reason, never skips)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from flux.cases import CaseRefusal, capture_case, decode_bundle, open_fixture_store
from flux.cases.bundle import compress

from tests.cases.conftest import _need


@pytest.fixture
def two_bundles(recorded: Path):
    return capture_case(recorded, "s_1", at=0), capture_case(recorded, "s_1", at=1)


def test_put_get_roundtrip_same_hash(store_url, two_bundles):
    a, b = two_bundles
    with open_fixture_store(store_url) as st:
        assert st.put(a) is True
        got = st.get(a.hash)
        assert got.hash == a.hash and got.data == a.data
        assert got.manifest == a.manifest and got.results == a.results
        assert st.has(a.hash) and not st.has(b.hash)


def test_saving_the_same_bundle_twice_keeps_one_copy(store_url, two_bundles):
    a, _ = two_bundles
    with open_fixture_store(store_url) as st:
        assert st.put(a) is True
        assert st.put(a) is False
        assert [e.hash for e in st.list()] == [a.hash]


def test_list_shows_summaries_sorted_by_hash(store_url, two_bundles):
    a, b = two_bundles
    with open_fixture_store(store_url) as st:
        st.put(b)
        st.put(a)
        rows = st.list()
        assert [r.hash for r in rows] == sorted([a.hash, b.hash])
        by = {r.hash: r for r in rows}
        assert by[a.hash].summary["fork_at"] == 0 and by[b.hash].summary["fork_at"] == 1
        assert by[a.hash].summary["kind"] == "agent"
        assert by[a.hash].summary["capture"]["complete"] is True
        assert by[a.hash].stored_bytes == len(compress(a.data))


def test_delete_removes_only_that_bundle(store_url, two_bundles):
    a, b = two_bundles
    with open_fixture_store(store_url) as st:
        st.put(a)
        st.put(b)
        assert st.delete(a.hash) is True
        assert st.delete(a.hash) is False
        assert [r.hash for r in st.list()] == [b.hash]
        with pytest.raises(CaseRefusal) as e:
            st.get(a.hash)
        assert e.value.code == "bundle_missing"


def test_missing_and_invalid_hashes_refuse_with_their_codes(store_url):
    with open_fixture_store(store_url) as st:
        with pytest.raises(CaseRefusal) as e:
            st.get("0" * 64)
        assert e.value.code == "bundle_missing"
        for bad in ("abc", "F" * 64, "0" * 63, "../" + "0" * 61):
            with pytest.raises(CaseRefusal) as e:
                st.get(bad)
            assert e.value.code == "invalid_fixture_hash"


def test_import_of_json_or_gzip_yields_the_same_hash(store_url, two_bundles):
    from flux.cases import readable_json

    a, _ = two_bundles
    with open_fixture_store(store_url) as st:
        b1, new1 = st.put_blob(readable_json(a))
        b2, new2 = st.put_blob(compress(a.data))
        assert b1.hash == b2.hash == a.hash
        assert (new1, new2) == (True, False)


def test_a_corrupt_import_writes_nothing(store_url, two_bundles):
    a, _ = two_bundles
    with open_fixture_store(store_url) as st:
        for blob in (compress(a.data)[:-9], b"{" + a.data, gzip.compress(b"not json"), b""):
            with pytest.raises(CaseRefusal) as e:
                st.put_blob(blob)
            assert e.value.code == "bundle_corrupt"
        assert st.list() == []


def test_stores_opened_again_see_what_was_saved(store_url, two_bundles):
    """Persistence: a second store object on the same URL (memory: is per object by design)."""
    a, _ = two_bundles
    with open_fixture_store(store_url) as st:
        st.put(a)
    with open_fixture_store(store_url) as st2:
        if store_url == "memory:":
            assert st2.list() == []
        else:
            assert st2.get(a.hash).hash == a.hash


def test_s3_urls_never_carry_credentials_or_unknown_settings():
    from flux.errors import FluxError

    for url in ("s3://AKIA:secret@bucket/p", "s3://bucket/p?aws_secret_access_key=x", "s3:///p"):
        with pytest.raises(FluxError):
            open_fixture_store(url)


def test_postgres_before_the_migration_names_the_command(postgres_server):
    from flux.errors import FluxError

    from tests.cases.conftest import _need

    dsn = _need(postgres_server).fresh_database("unmigrated")
    with pytest.raises(FluxError) as e:
        open_fixture_store(dsn)
    assert "flux db migrate" in str(e.value)


def test_flux_db_migrate_then_save_through_the_cli(postgres_server, recorded):
    import json

    from click.testing import CliRunner

    from flux.cli import main

    from tests.cases.conftest import _need

    dsn = _need(postgres_server).fresh_database("cli_migrate")
    env = {"FLUX_FIXTURE_STORE": None, "FLUX_POSTGRES_DSN": dsn}
    assert CliRunner().invoke(main, ["db", "migrate"], env=env).exit_code == 0
    assert CliRunner().invoke(main, ["db", "migrate"], env=env).exit_code == 0  # idempotent
    res = CliRunner().invoke(main, ["case", "save", "s_1", "--store", str(recorded)], env=env)
    assert res.exit_code == 0, res.output
    h = json.loads(res.stdout)["fixture_hash"]
    res = CliRunner().invoke(main, ["case", "run", h, "--replay-only"], env=env)
    assert res.exit_code == 0, res.output


def test_a_blob_changed_in_a_directory_store_is_corrupt(tmp_path, recorded):
    a = capture_case(recorded, "s_1")
    with open_fixture_store(str(tmp_path / "d")) as st:
        st.put(a)
        (tmp_path / "d" / f"{a.hash}.case").write_bytes(compress(a.data.replace(b"note", b"NOTE")))
        with pytest.raises(CaseRefusal) as e:
            st.get(a.hash)
        assert e.value.code == "bundle_corrupt"
