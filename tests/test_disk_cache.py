"""cdpbench.disk_cache: a value computed once is found by the next process, and nothing but the
same key and fingerprint finds it; a broken entry or folder only costs a computation."""

from __future__ import annotations

import json

import pytest

from cdpbench.disk_cache import cache_dir, file_fingerprint, memo


class Counter:
    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CDPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entries(folder):
    return sorted(p for p in folder.rglob("*.json"))


def test_second_call_reads_the_stored_float_bit_for_bit(folder):
    x = 0.1 + 0.2  # 0.30000000000000004: repr round-trips
    f = Counter(x)
    assert memo("ns", {"a": 1}, f, fingerprint="v1") == x
    assert memo("ns", {"a": 1}, f, fingerprint="v1") == x
    assert f.calls == 1
    assert len(entries(folder)) == 1
    assert not list(folder.rglob(".tmp-*"))


@pytest.mark.parametrize("other", [({"a": 2}, "v1", "ns"), ({"a": 1}, "v2", "ns"), ({"a": 1}, "v1", "other")])
def test_another_key_fingerprint_or_namespace_computes_again(folder, other):
    memo("ns", {"a": 1}, Counter(1.5), fingerprint="v1")
    key, fingerprint, namespace = other
    f = Counter(2.5)
    assert memo(namespace, key, f, fingerprint=fingerprint) == 2.5
    assert f.calls == 1


def test_corrupt_foreign_or_invalid_entries_are_computed_again(folder):
    memo("ns", {"a": 1}, Counter(0.5), fingerprint="v1")
    (path,) = entries(folder)
    for text in ["{not json", json.dumps({"ident": "someone else's", "value": 0.5}), json.dumps([1, 2])]:
        path.write_text(text)
        f = Counter(0.5)
        assert memo("ns", {"a": 1}, f, fingerprint="v1") == 0.5
        assert f.calls == 1
    ident = json.loads(path.read_text())["ident"]
    path.write_text(json.dumps({"ident": ident, "value": 7.0}))  # out of range for the caller
    f = Counter(0.5)
    assert memo("ns", {"a": 1}, f, fingerprint="v1", valid=lambda v: 0 <= v < 1) == 0.5
    assert f.calls == 1
    assert json.loads(path.read_text())["value"] == 0.5  # rewritten


def test_off_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CDPBENCH_CACHE_DIR", "off")
    assert cache_dir() is None
    f = Counter(3.0)
    memo("ns", {}, f, fingerprint="v")
    memo("ns", {}, f, fingerprint="v")
    assert f.calls == 2


def test_default_folder_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("CDPBENCH_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "cdpbench"


def test_an_unwritable_folder_only_costs_a_computation(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CDPBENCH_CACHE_DIR", str(blocker / "cache"))  # under a file: nothing can be made
    f = Counter(4.0)
    assert memo("ns", {}, f, fingerprint="v") == 4.0
    assert memo("ns", {}, f, fingerprint="v") == 4.0
    assert f.calls == 2


def test_file_fingerprint_changes_with_the_bytes_and_the_extra(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("x = 1\n")
    a = file_fingerprint(p, extra="numpy 2")
    assert a == file_fingerprint(p, extra="numpy 2")
    assert a != file_fingerprint(p, extra="numpy 3")
    p.write_text("x = 2\n")
    assert a != file_fingerprint(p, extra="numpy 2")
