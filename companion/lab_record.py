"""The lab chapters' recorded results, read back without training anything.

The lab chapters (12 to 14) train small models; ``book/data/lab_results.json`` keeps the
numbers they measured, one entry per seed, so that a later chapter can cite them in a
second instead of training again. :func:`recorded` reads that file. Losses are in nats
per predicted token, as everywhere in the lab.

The file's structure (``L`` is the lab's training length; lengths are string keys, as
JSON writes them)::

    {"ch12": {"seeds": [...], "lens": [L, 2L, 4L, 8L],
              "floor_by_length": {"32": ..., ...},
              "loss": {scheme: [[loss at each length] for each seed]}},
     "ch13": {"names": [...], "loss": {name: [loss for each seed]}, "floor": ...},
     "ch14": {"factors": [2, 4, 8], "train_len": L, "source": name,
              "trained": [excess at L for each seed],
              "zero_shot": {method: [[excess at each factor * L] for each seed]},
              "finetuned": {method: [[excess at each factor * L, or null]
                                     for each seed]}}}

Chapter 14's numbers are excesses: the loss minus the source's exact loss on the same
tokens (``source`` names it, one of :data:`companion.lab_runs.SOURCES`), so 0 is the
best possible at every length. ``null`` marks a factor at which a method was not
fine-tuned (the lab fine-tunes at one factor only).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "book" / "data" / "lab_results.json"
# What each chapter's entry must hold; a file without them was written by something
# else.
KEYS = {
    "ch12": ("seeds", "lens", "floor_by_length", "loss"),
    "ch13": ("names", "loss", "floor"),
    "ch14": ("factors", "train_len", "source", "trained", "zero_shot", "finetuned"),
}


def recorded(path=None) -> dict:
    """The lab's recorded results as plain Python data (lists, dicts, floats).

    Args:
        path: the JSON file to read, a ``str`` or a ``pathlib.Path``; by default
            ``book/data/lab_results.json`` of this repository.

    Returns:
        ``{"ch12": {...}, "ch13": {...}, "ch14": {...}}`` as the module's description
        shows.
    """
    if path is None:
        path = RESULTS
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"path must be a str or a pathlib.Path, got {type(path).__name__}"
        )
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded lab results at {path}; run the lab chapters (12 to 14), "
            "which write it"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(
            f"{path.name} must hold a JSON object, got {type(data).__name__}"
        )
    for chapter, keys in KEYS.items():
        entry = data.get(chapter)
        if not isinstance(entry, dict):
            raise ValueError(
                f"{path.name} has no {chapter!r} entry; the lab chapters write one each"
            )
        missing = [key for key in keys if key not in entry]
        if missing:
            raise ValueError(f"{path.name}: the {chapter!r} entry lacks {missing}")
    return data


# How far a recorded number may be from the one a chapter computes: another CPU adds in
# another order, and training amplifies that to about 0.01 nats in the lab's losses.
TOLERANCE = 0.03


def _plain(value):
    """``value`` as JSON data: arrays to lists, numpy scalars to Python numbers, keys to
    str."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return value


def _compare(recorded_value, value, where: str) -> list[str]:
    """Where ``value`` differs from ``recorded_value`` (numbers: by more than
    TOLERANCE)."""
    if isinstance(value, dict) and isinstance(recorded_value, dict):
        if sorted(value) != sorted(recorded_value):
            return [
                f"{where}: keys {sorted(value)} != recorded {sorted(recorded_value)}"
            ]
        return [
            d
            for k in value
            for d in _compare(recorded_value[k], value[k], f"{where}[{k!r}]")
        ]
    if isinstance(value, list) and isinstance(recorded_value, list):
        if len(value) != len(recorded_value):
            return [f"{where}: {len(value)} entries != recorded {len(recorded_value)}"]
        return [
            d
            for i, (r, v) in enumerate(zip(recorded_value, value))
            for d in _compare(r, v, f"{where}[{i}]")
        ]
    if isinstance(value, float) or isinstance(recorded_value, float):
        if (
            value is None
            or recorded_value is None
            or abs(value - recorded_value) > TOLERANCE
        ):
            return [f"{where}: {value} != recorded {recorded_value}"]
        return []
    return (
        []
        if value == recorded_value
        else [f"{where}: {value!r} != recorded {recorded_value!r}"]
    )


def record(chapter: str, entry: dict, *, path=None) -> bool:
    """Check a lab chapter's results against the recorded file, or write them there.

    The lab chapters end by calling this with what they measured. With ``LAB_RECORD=1``
    in the environment (an author's ``make execute LAB_RECORD=1``), ``entry`` replaces
    the chapter's entry in the file. Otherwise every number must be within
    ``TOLERANCE`` (0.03) of the recorded one, and everything else equal, so the file
    cannot silently go stale when the lab changes. With ``LAB_RESULTS_COPY=PATH`` (a
    plain ``make execute`` sets it to ``_build/lab_results.json``), a copy of the file
    with this entry in it is written to ``PATH`` first (a relative path is taken from
    the repository's root), so the numbers measured stay readable however the check
    ends.
    With ``LAB_SEEDS`` set (a rerun on other seeds) nothing is checked or written.

    Args:
        chapter: ``"ch12"``, ``"ch13"`` or ``"ch14"``.
        entry: the chapter's results, structured as the module's description shows.
        path: the JSON file; by default ``book/data/lab_results.json``.

    Returns:
        True if the file was checked or written, False if skipped (``LAB_SEEDS`` set).

    Raises:
        AssertionError: the results differ from the recorded ones (the message lists
            where).
    """
    if chapter not in KEYS:
        raise ValueError(f"chapter must be one of {sorted(KEYS)}, got {chapter!r}")
    if not isinstance(entry, dict):
        raise TypeError(f"entry must be a dict, got {type(entry).__name__}")
    missing = [key for key in KEYS[chapter] if key not in entry]
    if missing:
        raise ValueError(f"the {chapter!r} entry lacks {missing}")
    if os.environ.get("LAB_SEEDS", "").strip():
        return False
    path = RESULTS if path is None else Path(path)
    entry = _plain(entry)
    data = _read(path) if path.is_file() else {}
    copy = os.environ.get("LAB_RESULTS_COPY", "").strip()
    if copy:  # the copy keeps the other chapters' entries of earlier runs
        copy_path = RESULTS.parents[2] / copy
        kept = _read(copy_path) if copy_path.is_file() else data
        _write(copy_path, {**kept, chapter: entry})
    if os.environ.get("LAB_RECORD") == "1":
        _write(path, {**data, chapter: entry})
        return True
    if chapter not in data:
        raise AssertionError(
            f"{path.name} has no {chapter!r} entry: run make execute NB=... "
            "LAB_RECORD=1 on the chapter"
        )
    differences = _compare(data[chapter], entry, chapter)
    assert not differences, (
        f"the lab's recorded results are stale ({len(differences)} differences, e.g. "
        f"{differences[:3]}){_copy_note(copy)}; if the lab changed, re-execute the "
        "chapter with make execute NB=... LAB_RECORD=1, which rewrites "
        "book/data/lab_results.json"
    )
    return True


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _copy_note(copy: str) -> str:
    return f" (this run's results are in {copy})" if copy else ""
