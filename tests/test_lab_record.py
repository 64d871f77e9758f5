"""Tests of companion/lab_record.py: the recorded lab results and their reader."""

from __future__ import annotations

import json
import math

import pytest

from companion.lab_record import KEYS, RESULTS, recorded
from companion.lab_runs import SOURCES


def test_the_repository_file_has_every_chapter_and_key():
    data = recorded()
    assert RESULTS.is_file()
    for chapter, keys in KEYS.items():
        assert set(keys) <= set(data[chapter])


def test_chapter_12_losses_have_one_row_per_seed_and_one_value_per_length():
    ch12 = recorded()["ch12"]
    lens, seeds = ch12["lens"], ch12["seeds"]
    assert sorted(ch12["floor_by_length"]) == sorted(str(n) for n in lens)
    assert len(seeds) >= 2 and len(set(seeds)) == len(seeds)
    for scheme, rows in ch12["loss"].items():
        assert len(rows) == len(seeds), scheme
        assert all(len(row) == len(lens) and all(math.isfinite(x) for x in row) for row in rows)
        # A loss can never beat the chain's own floor at that length.
        assert all(x > ch12["floor_by_length"][str(n)] for row in rows for x, n in zip(row, lens))


def test_chapter_13_names_and_losses_match():
    ch13 = recorded()["ch13"]
    assert sorted(ch13["loss"]) == sorted(ch13["names"])
    sizes = {len(values) for values in ch13["loss"].values()}
    assert len(sizes) == 1 and sizes.pop() >= 2
    assert all(x > ch13["floor"] for values in ch13["loss"].values() for x in values)


def test_chapter_14_tables_have_one_column_per_factor():
    ch14 = recorded()["ch14"]
    factors, n_seeds = ch14["factors"], len(ch14["trained"])
    for table in ("zero_shot", "finetuned"):
        for method, rows in ch14[table].items():
            assert len(rows) == n_seeds and all(len(row) == len(factors) for row in rows), method
    for method, rows in ch14["finetuned"].items():
        tuned = [f for j, f in enumerate(factors) if all(row[j] is not None for row in rows)]
        assert tuned, f"{method} has no fine-tuned factor"
    assert ch14["source"] in SOURCES
    # An excess can never be far below 0: the source's own loss is the best possible.
    assert all(x > -0.01 for row in ch14["zero_shot"]["none"] for x in row)


def _write(tmp_path, data):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_reads_another_file_given_as_str_or_path(tmp_path):
    data = recorded()
    path = _write(tmp_path, data)
    assert recorded(path) == data == recorded(str(path))


def test_a_missing_file_says_how_to_make_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="lab chapters"):
        recorded(tmp_path / "nothing.json")


def test_a_path_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="path must be"):
        recorded(42)


@pytest.mark.parametrize("chapter", sorted(KEYS))
def test_a_file_without_a_chapter_or_a_key_is_refused(tmp_path, chapter):
    data = recorded()
    without_chapter = {k: v for k, v in data.items() if k != chapter}
    with pytest.raises(ValueError, match=chapter):
        recorded(_write(tmp_path, without_chapter))
    key = KEYS[chapter][0]
    without_key = {**data, chapter: {k: v for k, v in data[chapter].items() if k != key}}
    with pytest.raises(ValueError, match=key):
        recorded(_write(tmp_path, without_key))


def test_a_file_that_is_not_an_object_is_refused(tmp_path):
    with pytest.raises(ValueError, match="JSON object"):
        recorded(_write(tmp_path, [1, 2, 3]))
