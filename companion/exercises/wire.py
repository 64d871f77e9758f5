"""Answers as plain data: how a graded notebook's kernel hands values to the grader.

The grader runs a submission in a kernel it does not trust, so nothing crosses from the
kernel to the grader but JSON and ``.npy`` files, which the grader reads with
``allow_pickle=False``: reading them runs no code. :func:`dump` writes a value as one
``value.json`` (numbers, ``Decimal`` and ``Fraction`` exactly, other libraries' numbers
as floats, strings, lists, tuples, sets, dicts) that points to ``.npy`` files for arrays
and tensors (bfloat16 ones through float32, which holds them exactly); :func:`load`
reads it back. Anything else (a module, a function, an object of the learner's own
class) becomes an :class:`Opaque` placeholder that names its type, which every checker
rejects as a wrong type.

:func:`capture` is what the grader's capture cells call inside the kernel, right after
an exercise's cells: it writes the value of the name the exercise asks for or, for a
function answer, calls that function on the inputs the grader wrote and writes only its
outputs.
"""

from __future__ import annotations

import decimal
import fractions
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

MAX_DEPTH = 32          # nesting of lists and dicts
MAX_ITEMS = 100_000     # entries of one list, tuple, set or dict
MAX_ARRAYS = 64         # .npy files per value
MAX_BYTES = 64 << 20    # size of one value, JSON and arrays together, when it is read


class WireError(ValueError):
    """A value that cannot be written, or a file that is not a value this module
    wrote."""


class Opaque:
    """Stands for a value that has no plain-data form; its repr names the type."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name} object>"

    def __eq__(self, other) -> bool:
        return isinstance(other, Opaque) and other.type_name == self.type_name

    __hash__ = None


# ---- writing (kernel side) -----------------------------------------------------------

def _encode(value: Any, folder: Path, arrays: list, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"nested more than {MAX_DEPTH} levels deep")
    if value is None or type(value) is str:
        return value
    if isinstance(value, np.generic) and not isinstance(
        value, (np.str_, np.bytes_, np.void)
    ):
        # a NumPy scalar: written as a 0-d array, read back as one
        value = np.asarray(value)[()]
        return _array(value, "scalar", folder, arrays)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return {"bool": bool(value)}
    if isinstance(value, int):
        return {"int": str(int(value))}
    if isinstance(value, float):
        return {"float": float.__repr__(float(value))}  # keeps nan, inf and every bit
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, complex):
        return {"complex": [float.__repr__(value.real), float.__repr__(value.imag)]}
    if isinstance(value, decimal.Decimal):  # exact, as the checkers read it at home
        return {"decimal": str(value)}
    if isinstance(value, fractions.Fraction):
        return {"fraction": [str(value.numerator), str(value.denominator)]}
    if isinstance(value, (list, tuple, set, frozenset)):
        if len(value) > MAX_ITEMS:
            raise WireError(f"a {type(value).__name__} of more than {MAX_ITEMS} items")
        kind = next(
            k
            for k, base in (
                ("tuple", tuple),
                ("list", list),
                ("set", set),
                ("frozenset", frozenset),
            )
            if isinstance(value, base)
        )
        return {kind: [_encode(v, folder, arrays, depth + 1) for v in value]}
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            raise WireError(f"a dict of more than {MAX_ITEMS} items")
        return {
            "dict": [
                [
                    _encode(k, folder, arrays, depth + 1),
                    _encode(v, folder, arrays, depth + 1),
                ]
                for k, v in value.items()
            ]
        }
    tensor = type(value).__module__.startswith("torch") and hasattr(value, "detach")
    if tensor:
        value = value.detach().cpu().resolve_conj().resolve_neg()
        if str(value.dtype) == "torch.bfloat16":  # NumPy has none; float32 holds it
            return _array(value.float().numpy(), "tensor-bfloat16", folder, arrays)
        return _array(value.numpy(), "tensor", folder, arrays)
    if isinstance(value, np.ndarray):
        return _array(value, "ndarray", folder, arrays)
    if hasattr(type(value), "__float__") and not isinstance(value, (bytes, complex)):
        # another library's number (sympy's Float, Integer, Rational): the checkers
        # read it at home as its float value, and so does the grader
        try:
            return {"float": float.__repr__(float(value))}
        except (TypeError, ValueError, OverflowError):
            pass
    return {"opaque": type(value).__qualname__}


def _array(value, kind: str, folder: Path, arrays: list) -> dict:
    array = np.asarray(value)
    if array.dtype.hasobject or array.dtype.kind not in "biufcU":
        raise WireError(f"an array of dtype {array.dtype}")
    if len(arrays) >= MAX_ARRAYS:
        raise WireError(f"more than {MAX_ARRAYS} arrays")
    name = f"a{len(arrays)}.npy"
    np.save(
        folder / name,
        array if array.flags.c_contiguous else array.copy(order="C"),
        allow_pickle=False,
    )
    arrays.append(name)
    return {kind: name}


def dump(value: Any, folder: str | os.PathLike) -> None:
    """Write ``value`` into ``folder`` (created) as ``value.json`` and ``a<i>.npy``
    files."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    encoded = _encode(value, folder, [], 0)
    (folder / "value.json").write_text(json.dumps({"value": encoded}), encoding="utf-8")


# ---- reading (grader side) -----------------------------------------------------------

def _decode(node: Any, folder: Path, budget: list) -> Any:
    if node is None or isinstance(node, str):
        return node
    if not isinstance(node, dict) or len(node) != 1:
        raise WireError(f"unexpected node {str(node)[:80]}")
    (kind, payload), = node.items()
    if kind == "bool":
        return bool(payload)
    if kind == "int":
        if not isinstance(payload, str) or len(payload) > 4000:
            raise WireError("bad int")
        return int(payload)
    if kind == "float":
        return float(payload)
    if kind == "ellipsis":
        return Ellipsis
    if kind == "complex":
        if not isinstance(payload, list) or len(payload) != 2:
            raise WireError("bad complex")
        return complex(float(payload[0]), float(payload[1]))
    if kind == "decimal":
        if not isinstance(payload, str) or len(payload) > 4000:
            raise WireError("bad decimal")
        try:
            return decimal.Decimal(payload)
        except decimal.InvalidOperation:
            raise WireError("bad decimal") from None
    if kind == "fraction":
        if (not isinstance(payload, list) or len(payload) != 2
                or not all(isinstance(p, str) and len(p) <= 4000 for p in payload)):
            raise WireError("bad fraction")
        try:
            return fractions.Fraction(int(payload[0]), int(payload[1]))
        except (ValueError, ZeroDivisionError):
            raise WireError("bad fraction") from None
    if kind == "opaque":
        return Opaque(str(payload)[:200])
    if kind in ("list", "tuple", "set", "frozenset"):
        items = [_decode(v, folder, budget) for v in payload]
        if kind == "list":
            return items
        try:
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[kind](items)
        except TypeError:  # unhashable items in a set: a list says as much to a checker
            return items
    if kind == "dict":
        result = {}
        for pair in payload:
            key, value = (_decode(v, folder, budget) for v in pair)
            try:
                result[key] = value
            except TypeError:
                raise WireError("unhashable dict key") from None
        return result
    if kind in ("ndarray", "scalar", "tensor", "tensor-bfloat16"):
        if (
            not isinstance(payload, str)
            or "/" in payload
            or "\\" in payload
            or not payload.endswith(".npy")
        ):
            raise WireError("bad array file name")
        path = folder / payload
        if path.is_symlink() or not path.is_file():
            raise WireError(f"missing array file {payload}")
        budget[0] -= path.stat().st_size
        if budget[0] < 0:
            raise WireError(f"the value is larger than {MAX_BYTES >> 20} MiB")
        array = np.load(path, allow_pickle=False)
        if kind == "scalar":
            return array[()] if array.ndim == 0 else array
        if kind in ("tensor", "tensor-bfloat16"):
            import torch

            tensor = torch.from_numpy(np.array(array))
            return tensor.to(torch.bfloat16) if kind == "tensor-bfloat16" else tensor
        return array
    raise WireError(f"unknown kind {kind!r}")


def load(folder: str | os.PathLike) -> Any:
    """Read the value that :func:`dump` wrote into ``folder``. Runs no code from the
    files."""
    folder = Path(folder)
    path = folder / "value.json"
    if path.is_symlink() or not path.is_file():
        raise WireError("no value.json")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise WireError(f"value.json is larger than {MAX_BYTES >> 20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise WireError(f"value.json is not JSON: {err}") from None
    if not isinstance(data, dict) or "value" not in data:
        raise WireError("value.json has no value")
    try:
        return _decode(data["value"], folder, [MAX_BYTES - size])
    except WireError:
        raise
    except (
        RecursionError,
        ValueError,
        TypeError,
        KeyError,
        OSError,
        AttributeError,
    ) as err:
        raise WireError(
            f"not a value the grader wrote ({type(err).__name__})"
        ) from None


def read_json(path: str | os.PathLike, limit: int = 1 << 20) -> Any:
    """A small JSON file (a status record), or None if absent, too large or not JSON."""
    path = Path(path)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


# ---- capture (kernel side) -----------------------------------------------------------

def _describe(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= 300 else text[:297] + "..."


def capture(namespace: dict, label: str, folder: str, names: tuple[str, ...],
            kernel_call: str | None = None) -> None:
    """Record exercise ``label``'s answer from ``namespace`` (the kernel's globals) into
    ``folder``: ``status.json`` says what happened; ``value<j>/`` holds the value of
    ``names[j]`` or, for a function answer (``kernel_call`` given), ``out<i>/`` holds
    the output of ``kernel_call(namespace[names[0]], input)`` on the grader's input
    ``in<i>/``.

    Never raises: the grader reads a missing or broken answer as a wrong one.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    status: dict = {"label": label}
    try:
        missing = [name for name in names if name not in namespace]
        if missing:
            status["state"] = "missing"
            status["missing"] = missing
        elif kernel_call is None:
            for j, name in enumerate(names):
                dump(namespace[name], out / f"value{j}")
            status["state"] = "value"
        else:
            fn = namespace[names[0]]
            results = []
            for i in range(len(list(out.glob("in*")))):
                results.append(
                    _call_case(kernel_call, fn, load(out / f"in{i}"), out / f"out{i}")
                )
            status["state"] = "function"
            status["cases"] = results
    except BaseException as err:  # noqa: BLE001
        # the learner's value may break anything
        status["state"] = "error"
        status["error"] = _describe(err)
    (out / "status.json").write_text(json.dumps(status), encoding="utf-8")


def _call_case(kernel_call: str, fn, case, folder: Path) -> str:
    """Call ``fn`` on one input; write its output. Returns "ok", or what went wrong."""
    import importlib  # noqa: PLC0415

    if not callable(fn):
        return f"is not callable: {type(fn).__name__}"
    module, _, attr = kernel_call.partition(":")
    runner = getattr(importlib.import_module(module), attr)
    try:
        result = runner(fn, case)
    except Exception as err:  # noqa: BLE001 - the learner's function raised
        return "raised " + _describe(err)
    try:
        dump(result, folder)
    except Exception as err:  # noqa: BLE001
        return "output not readable: " + _describe(err)
    return "ok"
