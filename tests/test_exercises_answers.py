"""How every checker reads an answer (companion.exercises._answers): answers rounded
by hand, answers not given yet, numbers of other types (Decimal, Fraction, 0-d tensors,
half precision), and the style of the messages. Right answers come from
tests/test_exercises_dtypes.py, computed there independently of the checkers."""

from __future__ import annotations

import decimal
import fractions
import math
import warnings

import numpy as np
import pytest
import torch
from IPython.lib.pretty import pretty

from companion.alibi import alibi_slopes
from companion.exercises import (
    EXERCISES,
    Feedback,
    check_alibi_bias_entry,
    check_alibi_half_lives,
    check_alibi_slopes_12,
    check_checkpoint_layouts,
    check_equivariance_probe,
    check_order_one_rerun,
    check_permuted_weights,
    check_shift_property,
    check_small_base_rerun,
    check_t5_buckets_of_offsets,
    check_tensor2tensor_base,
)
from companion.exercises._answers import MIN_DIGITS, close, near_miss
from companion.exercises.registry import Outcome, grade_function
from test_exercises_ch12 import _rerun
from test_exercises_ch14 import _result
from test_exercises_dtypes import CASES

MORE = "Close: give more digits"
BIAS = -7 * 2**-2.5  # ch09-bias-entry: -1.2374368670764582
T2T = 10000 ** (64 / 62)  # ch03-t2t-base: 13459.58...
LIVES = np.array([math.log(2) * 2 ** (k / 2) for k in range(1, 17)])  # ch09-half-lives


def _digits(x, spec: str) -> np.ndarray:
    """Each entry of ``x`` as ``format(entry, spec)`` prints it, read back."""
    return np.vectorize(lambda v: float(format(v, spec)))(np.asarray(x, dtype=float))


def _floats(label: str) -> bool:
    """Whether the right answer of ``label`` has entries that are not whole numbers."""
    right = np.asarray(CASES[label][0], dtype=np.float64)
    return right.dtype != bool and not np.all(right == np.round(right))


FLOAT_LABELS = sorted(label for label in CASES if _floats(label))


# ---- the learner's review: rounded right answers -------------------------------------

def test_the_answers_the_review_found_rejected_now_pass():
    assert check_alibi_bias_entry(round(BIAS, 4))  # as the solution prints it, .4f
    assert check_tensor2tensor_base(13460)  # "about 13,460" in the prose
    assert check_tensor2tensor_base(13459)  # cut off, int(answer)
    assert check_tensor2tensor_base(13459.6)
    assert check_alibi_half_lives(np.round(LIVES, 4))
    assert check_alibi_half_lives(_digits(LIVES, ".4g"))


def test_half_lives_to_two_decimals_are_told_to_give_more_digits():
    feedback = check_alibi_half_lives(np.round(LIVES, 2))  # 0.98 has 2 digits
    assert not feedback and MORE in feedback.message
    assert "entry 0 (0.98)" in feedback.message


@pytest.mark.parametrize("form", [
    np.float32(round(BIAS, 4)),
    torch.tensor(round(BIAS, 4)),  # float32 holds -1.2373999357...
    torch.tensor(round(BIAS, 4)).item(),
    torch.tensor([round(BIAS, 4)]).tolist()[0],
    decimal.Decimal("-1.2374"),
])
def test_a_rounded_answer_counts_with_its_own_digits_in_every_form(form):
    assert check_alibi_bias_entry(form)


# ---- the rule, on one number ---------------------------------------------------------

@pytest.mark.parametrize("answer", [-1.2374, -1.237, -1.23744, -1.2374369])
def test_four_or_more_significant_digits_rounded_or_cut_off_pass(answer):
    assert close(answer, BIAS, rtol=1e-5)
    assert near_miss(answer, BIAS, rtol=1e-5) is None


@pytest.mark.parametrize("answer", [-1.24, -1.2, -1.23])
def test_two_or_three_significant_digits_are_told_close(answer):
    assert not close(answer, BIAS, rtol=1e-5)
    assert near_miss(answer, BIAS, rtol=1e-5).startswith(MORE)


@pytest.mark.parametrize("answer", [
    -1.2375,  # off by one in its last digit
    -1.2311,  # shares its first two digits, gives five
    -1.2363, -1.2373,
    -1.3, -1.0, -1, 0.0, 1.2374,
])
def test_an_answer_that_is_not_the_reference_rounded_stays_wrong(answer):
    assert not close(answer, BIAS, rtol=1e-5)
    assert near_miss(answer, BIAS, rtol=1e-5) is None


def test_min_digits_keeps_every_rounded_answer_ten_times_inside_the_mistakes():
    # cut off after MIN_DIGITS digits: off by under 1e-3 of the value; mistakes: 1% off
    assert 10.0 ** (1 - MIN_DIGITS) <= 1e-3


# ---- the rule, on arrays -------------------------------------------------------------

def test_an_array_rounded_to_decimals_or_to_digits_passes():
    row = np.array([math.sin(5 / 10000 ** (i / 8)) for i in range(8)])  # in [-1, 1]
    assert close(np.round(row, 4), row, atol=1e-5)  # 4 decimals: the largest's 4 digits
    assert close(_digits(row, ".4g"), row, atol=1e-5)
    assert near_miss(np.round(row, 3), row, atol=1e-5).startswith(MORE)


def test_an_entry_whose_trailing_zeros_vanish_does_not_count_as_coarse():
    reference = np.array([0.99996, 0.31234, -0.51236])
    answer = np.round(reference, 4)  # [1.0, 0.3123, -0.5124]: 1.0 reads as "1"
    assert close(answer, reference, atol=1e-6)
    assert close(_digits(reference, ".4g"), reference, rtol=1e-6)


def test_small_entries_of_a_relative_quantity_need_their_own_digits():
    slopes = alibi_slopes(12)
    assert check_alibi_slopes_12(_digits(slopes, ".4g"))
    feedback = check_alibi_slopes_12(np.round(slopes, 4))  # 2^-8 = 0.0039: 2 digits
    assert not feedback and MORE in feedback.message


def test_entries_already_within_the_tolerance_do_not_count():
    answer = LIVES.copy()
    answer[10:] = np.round(answer[10:], 2)  # 22.18 ... 177.45 rounded, the others exact
    assert check_alibi_half_lives(answer)


# ---- every float checker -------------------------------------------------------------

@pytest.mark.parametrize("label", FLOAT_LABELS)
def test_right_answer_to_four_or_more_digits_passes(label):
    right = CASES[label][0]
    for spec in (".4g", ".5g", ".7g"):
        for answer in (_digits(right, spec), _digits(right, spec).astype(np.float32)):
            feedback = EXERCISES[label].checker(answer)
            assert feedback, f"{label}, {spec}: {feedback.message}"


@pytest.mark.parametrize("label", FLOAT_LABELS)
def test_right_answer_to_fewer_digits_is_never_told_about_a_mistake(label):
    right = CASES[label][0]
    for answer in (_digits(right, ".3g"), np.round(np.asarray(right, dtype=float), 3)):
        feedback = EXERCISES[label].checker(answer)
        assert feedback or MORE in feedback.message, f"{label}: {feedback.message}"


@pytest.mark.parametrize("label", sorted(CASES))
def test_rounded_mistakes_stay_wrong_and_keep_their_diagnosis(label):
    for mistake, words in CASES[label][1]:
        for spec in (".3g", ".4g", ".6g"):
            feedback = EXERCISES[label].checker(_digits(mistake, spec))
            assert not feedback, f"{label}, {words}, {spec}"
        if (label, words) != ("ch04-base-rule", "*integer*"):  # 4231.3 -> integer 4231
            message = EXERCISES[label].checker(_digits(mistake, ".6g")).message
            assert words in message, (label, words, message)


@pytest.mark.parametrize("label", FLOAT_LABELS)
def test_an_answer_a_few_tenths_of_a_percent_off_is_not_close(label):
    right = np.asarray(CASES[label][0], dtype=np.float64)
    if label[:4] in ("ch02", "ch16") or label == "ch05-offset-scores":
        return  # tolerances of 2% and 3%; any multiple of a right A is right
    for factor in (1.0037, 0.9963):  # 0.37% off, given to 6 digits
        feedback = EXERCISES[label].checker(_digits(right * factor, ".6g"))
        assert not feedback and MORE not in feedback.message, (label, feedback.message)


# ---- answers not given yet -----------------------------------------------------------

@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_the_stub_is_told_it_is_not_answered_yet(label):
    ex = EXERCISES[label]
    feedback = ex.checker(*[...] * len(ex.names))
    assert not feedback and "still `...`" in feedback.message, feedback.message
    assert "ellipsis" not in feedback.message
    if len(ex.names) > 1:
        assert f"`{ex.names[0]}` is still" in feedback.message


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_none_is_told_to_look_for_a_missing_return(label):
    ex = EXERCISES[label]
    feedback = ex.checker(*[None] * len(ex.names))
    assert not feedback
    if ex.function is not None:
        assert "Expected a function" in feedback.message
    elif label == "ch16-suspect-offset":  # find_position_offset may rightly return None
        assert "find_position_offset returned None" in feedback.message
    else:
        assert "is None" in feedback.message and "`return`" in feedback.message
        assert "shape ()" not in feedback.message


def test_a_function_that_returns_none_is_told_so():
    told = "returned None: did you forget `return`?"
    feedback = check_permuted_weights(lambda weights, perm: None)
    assert not feedback and told in feedback.message
    feedback = check_equivariance_probe(lambda layer, dim: None)
    assert not feedback and told in feedback.message


def test_the_grader_says_when_a_function_returned_none_on_its_own_cases():
    ex = EXERCISES["ch01-permuted-weights"]
    public = [Outcome("ok", expected) for _, expected in ex.function.public_cases()]
    secret_cases = ex.function.secret_cases(np.random.default_rng(0))[:2]
    feedback = grade_function(ex, public, secret_cases, [Outcome("ok", None)] * 2)
    assert not feedback
    assert "returned None (did you forget `return`?)" in feedback.message


# ---- numbers of other types ----------------------------------------------------------

NUMBER_LABELS = sorted(
    label for label in CASES if np.asarray(CASES[label][0]).dtype != bool
)


@pytest.mark.parametrize("label", NUMBER_LABELS)
def test_decimal_and_fraction_numbers_are_numbers(label):
    right = np.asarray(CASES[label][0], dtype=np.float64)
    decimals = np.vectorize(lambda v: decimal.Decimal(repr(float(v))), otypes=[object])
    answers = [decimals(right).tolist(),
               np.vectorize(fractions.Fraction, otypes=[object])(right).tolist()]
    if right.ndim == 0:
        value = float(right)
        answers += [decimal.Decimal(repr(value)), fractions.Fraction(value)]
    for answer in answers:
        feedback = EXERCISES[label].checker(answer)
        assert feedback, f"{label}, {type(answer).__name__}: {feedback.message}"


def test_zero_d_boolean_tensors_are_booleans():
    truth = [False, True, False, True]
    assert check_shift_property({k: torch.tensor(v) for k, v in zip("ABCD", truth)})
    assert check_shift_property([torch.tensor(v) for v in truth])
    assert check_shift_property(torch.tensor(truth))
    assert check_order_one_rerun(_rerun(1.02), _rerun(1.2, order=2), torch.tensor(True))
    assert check_small_base_rerun(_result(1.8, 1.9), (1, torch.tensor(True)))
    assert check_small_base_rerun(_result(1.8, 1.9), (torch.tensor(1), np.array(True)))


@pytest.mark.parametrize("label", NUMBER_LABELS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, np.float16])
def test_half_precision_is_read_and_told_apart(label, dtype):
    right = np.asarray(CASES[label][0], dtype=np.float64)
    if dtype is np.float16:
        with np.errstate(over="ignore"):  # 82684.6 is too large for float16
            answer = right.astype(np.float16)
    else:
        answer = torch.tensor(right).to(dtype)
    feedback = EXERCISES[label].checker(answer)
    for words in ("ScalarType", "got Tensor", "could not read"):
        assert words not in feedback.message, (label, feedback.message)
    if not feedback:
        name = "float16" if dtype is np.float16 else str(dtype).replace("torch.", "")
        assert name in feedback.message and "float32 or float64" in feedback.message, (
            label, feedback.message)


def test_half_precision_of_the_reviews_cases_names_the_dtype():
    for dtype in (torch.bfloat16, torch.float16):
        feedback = check_alibi_slopes_12(torch.tensor(alibi_slopes(12), dtype=dtype))
        assert not feedback and str(dtype).replace("torch.", "") in feedback.message
        feedback = check_tensor2tensor_base(torch.tensor(T2T, dtype=dtype))
        assert not feedback and "float32 or float64" in feedback.message


# ---- messages ------------------------------------------------------------------------

WRONG = [None, ..., "abc", 1j, 0.5, -3, [1.0, 2.0], np.zeros((3, 3)), np.ones(16),
         {"a": 1}, object(), lambda: 0, np.array([1j, 2j]),
         torch.zeros(12, dtype=torch.bfloat16), [decimal.Decimal("1.5"), 2],
         fractions.Fraction(1, 3), torch.tensor(False)]


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_wrong_answers_read_as_sentences_folded_to_88_characters(label):
    ex = EXERCISES[label]
    for answer in WRONG:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no ComplexWarning, no cast warning
            feedback = ex.checker(*[answer] * len(ex.names))
        assert isinstance(feedback, Feedback) and not feedback, (label, answer)
        first = repr(feedback).removeprefix("Not yet. ").split(" ", 1)[0]
        assert not (first.isalpha() and first.islower()), (label, repr(feedback))
        assert "\n" not in repr(feedback)  # one line in the grader's CSV
        assert pretty(feedback) == str(feedback)
        assert max(map(len, str(feedback).split("\n"))) <= 88, (label, str(feedback))


@pytest.mark.parametrize("label", [label for label in NUMBER_LABELS  # any labels do:
                                   if label != "ch01-pooled-groups"])
def test_complex_numbers_are_told_to_be_real(label):
    right = np.asarray(CASES[label][0], dtype=np.float64)
    for answer in (right + 1j, torch.tensor(right + 1j), (right + 1j).tolist()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            feedback = EXERCISES[label].checker(answer)
        assert not feedback and "complex" in feedback.message, (label, feedback.message)


def test_counts_of_wrong_parts_agree_with_their_verb():
    one_off = check_shift_property([False] * 3 + [True])
    assert "1 of the 4 answers is off" in one_off.message
    assert "2 of the 4 answers are off" in check_shift_property([True] * 4).message
    assert "1 of the 6 buckets is off" in check_t5_buckets_of_offsets(
        [15, 11, 3, 0, 21, 28]).message
    layouts = {"gpt_neox": "interleaved", "gptj": "halves", "llama": "halves",
               "roformer": "interleaved"}
    assert "2 of the 4 layouts are off" in check_checkpoint_layouts(layouts).message
