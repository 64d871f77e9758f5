"""What the grader reads from a kernel (companion.exercises.wire) is what the learner's
checker read at home: the same answers pass and fail in both places."""

from __future__ import annotations

import decimal
import fractions

import numpy as np
import pytest
import sympy
import torch

from companion.exercises import (
    check_alibi_slopes_12,
    check_tensor2tensor_base,
    wire,
)


def _through_the_wire(value, tmp_path):
    wire.dump(value, tmp_path)
    return wire.load(tmp_path)


BASE = 10000 ** (64 / 62)
FORMS = {
    "float": BASE,
    "Decimal": decimal.Decimal("13459.6"),
    "Fraction": fractions.Fraction(134596, 10),
    "sympy Float": sympy.Float(13459.6),
    "sympy Rational": sympy.Rational(134596, 10),
    "rounded int": 13460,
    "wrong Decimal": decimal.Decimal("10000"),
    "complex": complex(BASE, 0),
}


@pytest.mark.parametrize("form", FORMS)
def test_a_number_in_any_form_is_judged_alike_at_home_and_in_the_grader(form, tmp_path):
    value = FORMS[form]
    home = check_tensor2tensor_base(value)
    graded = check_tensor2tensor_base(_through_the_wire(value, tmp_path))
    assert bool(home) == bool(graded), f"{form}: home says {home}, grader {graded}"
    assert str(home) == str(graded), f"{form}: the same feedback in both places"


SLOPES = 2.0 ** (-8 * np.arange(1, 13) / 12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16,
                                   torch.bfloat16])
def test_tensors_of_every_precision_are_judged_alike(dtype, tmp_path):
    value = torch.tensor(SLOPES, dtype=dtype)
    home = check_alibi_slopes_12(value)
    back = _through_the_wire(value, tmp_path)
    assert back.dtype == dtype, "the tensor comes back in its own dtype"
    assert torch.equal(back, value), "and with the same values"
    graded = check_alibi_slopes_12(back)
    assert str(home) == str(graded), f"{dtype}: the same feedback in both places"


def test_decimal_and_fraction_come_back_exact(tmp_path):
    value = [decimal.Decimal("0.1"), fractions.Fraction(1, 3)]
    assert _through_the_wire(value, tmp_path) == value, "no rounding on the way"


@pytest.mark.parametrize("payload", [
    {"decimal": "not a number"}, {"fraction": ["1", "0"]}, {"fraction": "1/3"},
    {"complex": [1.0]},
])
def test_bad_payloads_are_refused(payload, tmp_path):
    import json

    (tmp_path / "value.json").write_text(json.dumps({"value": payload}))
    with pytest.raises(wire.WireError):
        wire.load(tmp_path)


def test_a_good_payload_written_by_hand_is_read(tmp_path):
    import json

    (tmp_path / "value.json").write_text(json.dumps({"value": {"decimal": "1.25"}}))
    assert wire.load(tmp_path) == decimal.Decimal("1.25"), "the format the bad ones break"
