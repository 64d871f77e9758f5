"""companion.lab_record.record: the lab chapters write (LAB_RECORD=1) or check their results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from companion.lab_record import TOLERANCE, record

ENTRY = {"seeds": [0, 1], "lens": [4, 8], "floor_by_length": {4: 1.5, 8: 1.25},
         "loss": {"rope": np.array([[1.75, 2.0], [1.8, 2.1]])}}


def test_written_then_checked(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    monkeypatch.delenv("LAB_SEEDS", raising=False)
    monkeypatch.setenv("LAB_RECORD", "1")
    assert record("ch12", ENTRY, path=path)
    written = json.loads(path.read_text())["ch12"]
    assert written == {"seeds": [0, 1], "lens": [4, 8], "floor_by_length": {"4": 1.5, "8": 1.25},
                       "loss": {"rope": [[1.75, 2.0], [1.8, 2.1]]}}
    monkeypatch.delenv("LAB_RECORD")
    close = {**ENTRY, "loss": {"rope": ENTRY["loss"]["rope"] + TOLERANCE / 2}}
    assert record("ch12", close, path=path)  # another CPU's last digits pass
    stale = {**ENTRY, "loss": {"rope": ENTRY["loss"]["rope"] + 2 * TOLERANCE}}
    with pytest.raises(AssertionError, match=r"stale \(4 differences.*make execute"):
        record("ch12", stale, path=path)
    with pytest.raises(AssertionError, match="keys"):
        record("ch12", {**ENTRY, "loss": {"alibi": ENTRY["loss"]["rope"]}}, path=path)
    with pytest.raises(AssertionError, match="no 'ch13' entry"):
        record("ch13", {"names": [], "loss": {}, "floor": 1.0}, path=path)


def test_other_seeds_are_neither_checked_nor_written(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_SEEDS", "5,6")
    monkeypatch.setenv("LAB_RECORD", "1")
    assert record("ch12", ENTRY, path=tmp_path / "results.json") is False
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("chapter, entry, error, words", [
    ("ch99", ENTRY, ValueError, "chapter must be one of"),
    ("ch12", [1, 2], TypeError, "entry must be a dict"),
    ("ch12", {"seeds": [0]}, ValueError, "lacks"),
])
def test_bad_arguments(chapter, entry, error, words):
    with pytest.raises(error, match=words):
        record(chapter, entry)
