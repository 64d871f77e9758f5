"""Every checker of chapters 1-11 accepts a right answer in float32 and in float64, NumPy and
torch, and still names a mistake in float32; a right answer computed in float32 from scratch
(not a rounded float64 one) passes too. Right answers are computed here, independently of the
checkers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import EXERCISES, Feedback, ROPE_HAND_VECTOR
from companion.exercises import (
    check_alibi_bias_entry, check_alibi_half_lives, check_alibi_slopes_12, check_denominators,
    check_expected_abs_cosine, check_extend_table, check_fairseq_mapping, check_longest_wavelength,
    check_longrope_attention_factor, check_mla_cache_entries, check_mrope_position_ids,
    check_matching_init_std, check_ntk_base, check_pair_block, check_pe_row,
    check_permuted_weights, check_ported_query_weight, check_rope_rotated_vector,
    check_rule_of_thumb_base, check_table_row_rms, check_tensor2tensor_base,
    check_wavelength_ratio, porting_exercise_weights, rope_interleaved_query_weight,
    rotation_mystery_tables,
)
from companion.exercises.registry import call_with_args
from companion.sinusoidal import rotation_matrix
from test_exercises_ch05 import _halves_blocks  # the chapter 5 tests' own builder

CHAPTERS = [f"ch{n:02d}" for n in range(1, 12)]


# ---- right answers, by loops and closed forms ----------------------------------------------

def _pe(pos: float, dim: int, layout: str = "interleaved") -> np.ndarray:
    angles = [pos / 10000.0 ** (2 * i / dim) for i in range(dim // 2)]
    sin, cos = [math.sin(a) for a in angles], [math.cos(a) for a in angles]
    if layout == "halves":
        return np.array(sin + cos)
    return np.array([v for pair in zip(sin, cos) for v in pair])


def _block(angle: float) -> np.ndarray:
    return np.array([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]])


def _rotate(x, m: float) -> np.ndarray:
    """RoPE of the interleaved pairs (0, 1), (2, 3), ... at position m, pair by pair."""
    out = list(x)
    for i in range(len(x) // 2):
        angle = m / 10000.0 ** (2 * i / len(x))
        a, c, s = 2 * i, math.cos(angle), math.sin(angle)
        out[a], out[a + 1] = x[a] * c - x[a + 1] * s, x[a] * s + x[a + 1] * c
    return np.array(out)


def _first_negative(d: int) -> int:
    k = 1
    while sum(math.cos(k / 10000.0 ** (2 * i / d)) for i in range(d // 2)) >= 0:
        k += 1
    return k


def _smallest_base(d: int = 64, goal: int = 20480) -> int:
    base = 2
    while 2 * math.pi * base ** ((d - 2) / d) < goal:
        base += 1
    return base


def _mean_abs_cosine(d: int, points: int = 200_001) -> float:
    t = np.linspace(-1.0, 1.0, points)  # a coordinate of a random unit vector, by its density
    density = (1.0 - t**2) ** ((d - 3) / 2)
    return float(np.trapezoid(np.abs(t) * density, t) / np.trapezoid(density, t))


def _shift_truth() -> list[bool]:
    labels = []
    for table in rotation_mystery_tables().values():
        x, y = table[:-5], table[5:]
        residual = x @ (np.linalg.pinv(x) @ y) - y
        labels.append(bool(np.linalg.norm(residual) < 1e-8 * np.linalg.norm(y)))
    return labels




def _t5_bucket(offset: int) -> int:
    """Bidirectional, 32 buckets, max_distance 128: 16 per direction, 8 exact then log-spaced."""
    first, back = (16 if offset > 0 else 0), abs(offset)
    if back < 8:
        return first + back
    return first + min(8 + int(math.log(back / 8) / math.log(128 / 8) * 8), 15)


def _speed(i: int, d: int, base: float = 10000.0) -> float:
    return base ** (-2 * i / d)


def _yarn_classes() -> list[int]:
    turns = [4096 * _speed(i, 64) / (2 * math.pi) for i in range(32)]
    return [sum(t > 32 for t in turns), sum(t < 1 for t in turns)]


def _ntk_unseen() -> int:
    d, length, s = 64, 4096, 8
    new_base = 10000.0 * s ** (d / (d - 2))
    return sum(length * _speed(i, d) < 2 * math.pi
               and (s * length - 1) * _speed(i, d, new_base) > length * _speed(i, d)
               for i in range(d // 2))


SLOPES_12 = [2.0 ** -k for k in range(1, 9)] + [2.0 ** -(k / 2) for k in (1, 3, 5, 7)]
SLOPES_16 = [2.0 ** -(k / 2) for k in range(1, 17)]


def _rows_within_heads(w: np.ndarray, heads: int, inverse: bool = False) -> np.ndarray:
    d = w.shape[0] // heads
    order = [r for r in range(0, d, 2)] + [r for r in range(1, d, 2)]
    if inverse:
        order = list(np.argsort(order))
    return w[[h * d + r for h in range(heads) for r in order]]


POOLED = ["dog bites man", "man bites dog", "dog bites dog", "bites man dog", "dog dog bites",
          "bites dog bites"]
FAIRSEQ_BASE = 10000 ** (64 / 62)
NTK_BASE = 10000 * 8 ** (128 / 126)
PE_ROW = _pe(5, 16)
DENOMINATORS = np.array([10000 ** (2 * i / 16) for i in range(8)])
INTERLEAVED = np.stack([_pe(p, 12) for p in range(10)])
HALVES = np.stack([_pe(p, 12, "halves") for p in range(10)])
RATIO = math.exp(2 * math.log(10000) / 512)
PAIR_ANGLE = 10 / 10000 ** (6 / 64)
EXTENDED = np.stack([_pe(p, 32) for p in range(50, 60)])
BLOCKS = _halves_blocks(np.linspace(1.0, 0.3, 8), np.linspace(0.8, -0.5, 8))
T5_OFFSETS = [-100, -20, -3, 0, 5, 40]
SHAW = np.clip(np.arange(5)[None, :] - np.arange(5)[:, None], -3, 3) + 3
HAND = np.array(ROPE_HAND_VECTOR)
PERM = [0, 2, 4, 6, 1, 3, 5, 7]
HALVES_QUERY = _rows_within_heads(rope_interleaved_query_weight(), 2)
PORTED = _rows_within_heads(porting_exercise_weights().numpy(), 4)
HALF_LIVES = [math.log(2) / m for m in SLOPES_16]


def _mrope_ids(after: int = 6, start: int = 2) -> np.ndarray:
    """Chapter 11: 2 text tokens, an image of 4 x 3 merged tokens at 2, 3 text tokens."""
    image = [(2, start + r, start + c) for r in range(4) for c in range(3)]
    text = [(i, i, i) for i in (0, 1)] + image + [(i, i, i) for i in range(after, after + 3)]
    return np.array(text).T


MROPE_IDS = _mrope_ids()
LONGROPE_A = math.sqrt(1 + math.log(65536 / 8192) / math.log(8192))

# label -> the right answer, and (a diagnosed mistake, words of its diagnosis) pairs.
CASES = {
    "ch01-pooled-groups": ([0, 0, 2, 0, 2, 5], [([0, 0, 1, 0, 1, 1], "counts twice")]),
    "ch01-distinct-orderings": ([1, 12], [([1, 24], "two copies of 'dog'")]),
    "ch02-matching-init": (1 / math.sqrt(2 * 768), [(math.sqrt(0.5), "table itself must start"),
                                                    (1 / math.sqrt(768), "standard deviation 1")]),
    "ch02-row-rms": (np.full(50, math.sqrt(0.5)),
                     [(np.full(50, 0.5), "mean squares"),
                      (np.full(50, math.sqrt(32)), "Euclidean norms")]),
    "ch02-max-len": (121, [(120, "too short by one"), (312, "not one per token")]),
    "ch02-random-cosine": (_mean_abs_cosine(768), [(1 / math.sqrt(768), "root-mean-square")]),
    "ch03-pe-row": (PE_ROW, [(np.concatenate([PE_ROW[0::2], PE_ROW[1::2]]), "wrong order"),
                             (PE_ROW.reshape(-1, 2)[:, ::-1].reshape(-1), "swapped"),
                             (_pe(6, 16), "position 6")]),
    "ch03-denominators": (DENOMINATORS, [(1 / DENOMINATORS, "reciprocals"),
                                         (10000 ** (np.arange(8) / 16), "doubled")]),
    "ch03-halves-to-interleaved": (INTERLEAVED, [(HALVES, "still in the halves layout")]),
    "ch03-t2t-base": (10000 ** (32 / 31), [(10000.0, "paper's base"),
                                           (10000 ** (62 / 64), "upside down")]),
    "ch04-longest-wavelength": (2 * math.pi * 10000 ** (126 / 128),
                                [(2 * math.pi * 10000, "not a pair index"),
                                 (2 * math.pi * 10000 ** (127 / 128), "exponent")]),
    "ch04-first-negative": (_first_negative(32), [(_first_negative(32) - 1, "still")]),
    "ch04-wavelength-ratio": (RATIO, [(1 / RATIO, "ratio of frequencies"),
                                      (10000 ** (1 / 512), "not i/d"),
                                      (2 * math.pi * RATIO, "cancels")]),
    "ch04-base-rule": (_smallest_base(), [((20480 / (2 * math.pi)) ** (64 / 62), "*integer*"),
                                          (_smallest_base() - 1, "short of"),
                                          (20480, "2*pi is missing")]),
    "ch05-pair-block": (_block(PAIR_ANGLE), [(_block(PAIR_ANGLE).T, "counter-clockwise"),
                                             (_block(10 / 10000 ** (3 / 64)), "wrong angle")]),
    "ch05-extend-table": (EXTENDED, [(np.stack([_pe(p, 32) for p in range(30, 40)]), "backwards"),
                                     (np.concatenate([EXTENDED[:, 0::2], EXTENDED[:, 1::2]], 1),
                                      "feature order"),
                                     (np.repeat(EXTENDED[:1], 10, axis=0), "same offset")]),
    "ch05-which-shift": (_shift_truth(), [([True] * 4, "least squares")]),
    "ch05-offset-scores": (BLOCKS, [(np.eye(16), "before from after"),
                                    (np.random.default_rng(0).standard_normal((16, 16)),
                                     "still changes with m")]),
    "ch06-t5-buckets": ([_t5_bucket(r) for r in T5_OFFSETS],
                        [([_t5_bucket(-r) for r in T5_OFFSETS], "halves are swapped")]),
    "ch06-shaw-index": (SHAW, [(SHAW - 3, "clipped offsets themselves"),
                               (SHAW.T, "Rows and columns are swapped")]),
    "ch06-missing-rows": (list(range(512, 600)), [(list(range(513, 601)), "counted from 1")]),
    "ch07-rotate-by-hand": (_rotate(HAND, 3), [(HAND, "unchanged"),
                                               (_rotate(HAND, -3), "wrong way")]),
    "ch07-pair-permutation": (PERM, [(list(np.argsort(PERM)), "inverse permutation")]),
    "ch07-convert-query-weight": (HALVES_QUERY,
                                  [(rope_interleaved_query_weight(), "unchanged"),
                                   (_rows_within_heads(rope_interleaved_query_weight(), 2, True),
                                    "opposite way")]),
    "ch08-ntk-base": (NTK_BASE, [(10000 * 8, "a bit less than s"),
                                 (10000 * 8 ** (126 / 128), "upside down")]),
    "ch08-yarn-classes": (_yarn_classes(), [(_yarn_classes()[::-1], "swapped")]),
    "ch08-ntk-unseen": (_ntk_unseen(), [(9, "every pair with less than one turn")]),
    "ch09-slopes-12": (SLOPES_12, [(sorted(SLOPES_12), "another order"),
                                   ([2 ** (-8 * k / 12) for k in range(1, 13)], "geometric")]),
    "ch09-bias-entry": (-7 * 2 ** -2.5, [(7 * 2 ** -2.5, "sign"), (-7 * 2 ** -2.5 / 8, "scaling"),
                                         (-8 * 2 ** -2.5, "wrong distance")]),
    "ch09-half-lives": (HALF_LIVES, [(HALF_LIVES[::-1], "reversed"),
                                     ([1 / m for m in SLOPES_16], "factor e")]),
    "ch10-port-weights": (PORTED, [(porting_exercise_weights().numpy(), "unchanged"),
                                   (_rows_within_heads(porting_exercise_weights().numpy(), 4,
                                                       True), "other way"),
                                   (porting_exercise_weights().numpy()[::-1].copy(),
                                    "not the one")]),
    "ch10-fairseq-mapping": ([FAIRSEQ_BASE, 12], [([10000.0, 12], "paper's spacing"),
                                                  ([FAIRSEQ_BASE, 10], "from 0"),
                                                  ([FAIRSEQ_BASE, 11], "padding_idx + 1")]),
    "ch11-mrope-ids": (MROPE_IDS, [(_mrope_ids(after=14), "one position per image token"),
                                   (_mrope_ids(start=0), "not at 0")]),
    "ch11-longrope-factor": (LONGROPE_A, [(0.1 * math.log(8) + 1, "YaRN's"),
                                          (LONGROPE_A**2, "a squared")]),
    "ch11-mla-cache": ([320, 8192], [([256, 8192], "rotated key"),
                                     ([320, 4096], "value too")]),
}


def _forms(value) -> dict:
    """The answer as float64 and float32, NumPy and torch, and as plain Python."""
    array = np.asarray(value, dtype=np.float64)
    forms = {"float64 numpy": array, "float32 numpy": array.astype(np.float32),
             "float32 torch": torch.tensor(array, dtype=torch.float32),
             "float64 torch": torch.tensor(array, dtype=torch.float64),
             "python": array.astype(np.float32).tolist()}  # float32 values, as .tolist() gives
    if array.ndim == 0:
        forms.update({"np.float32": np.float32(array), "np.float64": np.float64(array)})
    return forms


def _check(label: str, answer) -> Feedback:
    feedback = EXERCISES[label].checker(answer)
    assert isinstance(feedback, Feedback) and feedback.message.strip()
    return feedback


def test_every_value_checker_of_chapters_1_to_11_has_cases():
    labels = {label for label, ex in EXERCISES.items()
              if label[:4] in CHAPTERS and ex.function is None}
    assert labels == set(CASES)


@pytest.mark.parametrize("label", sorted(CASES))
def test_right_answer_passes_in_every_dtype(label):
    for form, answer in _forms(CASES[label][0]).items():
        feedback = _check(label, answer)
        assert feedback.ok, f"{label}, {form}: {feedback.message}"


@pytest.mark.parametrize("label", sorted(CASES))
def test_named_mistakes_keep_their_diagnosis_in_float32(label):
    for mistake, words in CASES[label][1]:
        for form, answer in _forms(mistake).items():
            feedback = _check(label, answer)
            assert not feedback.ok and words in feedback.message, f"{label}, {form}: {feedback}"


@pytest.mark.parametrize("label", sorted(CASES))
def test_mistakes_are_far_outside_the_tolerance(label):
    # A right answer moved by ten float32 roundings, in float64, still passes...
    right = np.asarray(CASES[label][0], dtype=np.float64)
    whole = right == np.round(right)  # counts, indices, positions: compared exactly
    if np.all(whole):
        return
    nudged = np.where(whole, right, right * (1 + 10 * float(np.finfo(np.float32).eps)))
    assert _check(label, nudged).ok
    # ...and every named mistake is 1% away somewhere (relative; absolute for the entries of
    # an array below 1), a hundred times the loosest float32-sized tolerance, 1e-4.
    scale = np.abs(right) if right.ndim == 0 else np.maximum(np.abs(right), 1)
    for mistake, _ in CASES[label][1]:
        off = np.abs(np.asarray(mistake, dtype=np.float64) - right) / scale
        assert off.max() > 1e-2, (label, mistake)


# ---- right answers computed in float32 from the start --------------------------------------

def _inv_freq32(d: int) -> torch.Tensor:
    """The frequencies as most code writes them, in float32: exp(-2i/d * ln 10000)."""
    return torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))


def _table32(n: int, d: int) -> torch.Tensor:
    angles = torch.arange(n).float()[:, None] * _inv_freq32(d)
    table = torch.zeros(n, d)
    table[:, 0::2], table[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return table


def test_float32_computations_of_chapters_2_and_3_pass():
    assert check_matching_init_std(torch.sqrt(torch.tensor(0.5)) / torch.sqrt(torch.tensor(768.0)))
    assert check_table_row_rms(_table32(50, 64).pow(2).mean(dim=1).sqrt())
    lgamma = torch.lgamma(torch.tensor([384.0, 384.5]))
    assert check_expected_abs_cosine(torch.exp(lgamma[0] - lgamma[1]) / math.sqrt(math.pi))
    assert check_pe_row(_table32(6, 16)[5])
    assert check_denominators(1 / _inv_freq32(16))
    assert check_tensor2tensor_base(torch.exp(torch.tensor(math.log(10000.0)) * 64 / 62))
    assert check_tensor2tensor_base(torch.tensor(10000.0) ** (64 / 62))


def test_float32_wavelengths_of_chapter_4_pass():
    wavelengths = 2 * math.pi / _inv_freq32(512)
    ratios = wavelengths[1:] / wavelengths[:-1]
    assert float((ratios / RATIO - 1).abs().max()) > 1e-7  # what the old rtol of 1e-7 rejected
    for ratio in ratios:  # every pair's ratio, whichever pair the learner picks
        assert check_wavelength_ratio(ratio), float(ratio)
        assert check_wavelength_ratio(ratio.item())  # float32's error, without its dtype
    assert check_wavelength_ratio(ratios.mean())
    assert check_wavelength_ratio(torch.tensor(10000.0) ** (2 / 512))
    assert check_longest_wavelength(2 * math.pi / _inv_freq32(128)[-1])
    exact = (torch.tensor(20480.0) / (2 * math.pi)) ** (64 / 62)
    assert check_rule_of_thumb_base(torch.ceil(exact))
    feedback = check_rule_of_thumb_base(exact)
    assert not feedback and "*integer*" in feedback.message


def test_float32_rotations_of_chapter_5_pass():
    angle = 10 * _inv_freq32(64)[3]
    c, s = torch.cos(angle), torch.sin(angle)
    assert check_pair_block(torch.stack([torch.stack([c, s]), torch.stack([-s, c])]))
    table = _table32(50, 32)
    rotation = torch.from_numpy(rotation_matrix(10, 32))
    answers = {  # float32 is off by ~2e-6 here: the old 1e-6 named a bug that was not there
        "float32": table[40:] @ rotation.float().T,
        "float32, .tolist()": (table[40:] @ rotation.float().T).tolist(),
        "float32 table, float64 product": table[40:].double() @ rotation.T,
        "NumPy promotes to float64": table[40:].numpy() @ rotation.numpy().T,
        "float32 formula": _table32(60, 32)[50:],
    }
    for name, answer in answers.items():
        feedback = check_extend_table(answer)
        assert feedback, f"{name}: {feedback.message}"
    backwards = table[40:] @ rotation.float()  # R(k) applied on the wrong side: rows move back
    feedback = check_extend_table(backwards)
    assert not feedback and "backwards" in feedback.message


def test_float32_computations_of_chapters_7_to_10_pass():
    x = torch.tensor(ROPE_HAND_VECTOR)
    z = torch.view_as_complex(x.reshape(-1, 2)) * torch.polar(torch.ones(2), 3 * _inv_freq32(4))
    assert check_rope_rotated_vector(torch.view_as_real(z).reshape(-1))
    assert check_ntk_base(torch.tensor(10000.0) * torch.tensor(8.0) ** (128 / 126))
    assert check_ntk_base(torch.exp(math.log(10000.0) + torch.log(torch.tensor(8.0)) * 128 / 126))
    start = torch.tensor(2.0) ** -0.5
    slopes_16 = torch.cumprod(torch.full((16,), start.item()), dim=0)  # start * start ** k
    slopes_8 = torch.cumprod(torch.full((8,), 0.5), dim=0)
    slopes_12 = torch.cat([slopes_8, slopes_16[0::2][:4]])
    assert check_alibi_slopes_12(slopes_12)
    assert check_alibi_bias_entry(-slopes_12[10] * (40 - 33))
    assert check_alibi_half_lives(torch.log(torch.tensor(2.0)) / slopes_16)
    base = torch.exp(torch.tensor(math.log(10000.0)) * 64 / 62)
    assert check_fairseq_mapping((base, 12))
    assert check_fairseq_mapping(torch.stack([base, torch.tensor(12.0)]))
    w32 = porting_exercise_weights().float()
    assert check_ported_query_weight(torch.from_numpy(_rows_within_heads(w32.numpy(), 4)))
    feedback = check_ported_query_weight(w32.flip(0))  # rows reordered, but not per head
    assert not feedback and "not the one" in feedback.message


def test_float32_computations_of_chapter_11_pass():
    s32, l32 = torch.tensor(65536.0) / torch.tensor(8192.0), torch.tensor(8192.0)
    assert check_longrope_attention_factor(torch.sqrt(1 + torch.log(s32) / torch.log(l32)))
    assert check_longrope_attention_factor(np.sqrt(np.float32(1) + np.log(np.float32(8))
                                                   / np.log(np.float32(8192))))
    assert check_mrope_position_ids(torch.from_numpy(MROPE_IDS).float())
    assert check_mla_cache_entries(torch.tensor([256.0 + 64.0, 32.0 * (64 + 64 + 128)]))


def test_function_answers_accept_float32_outputs():
    def permuted_float32(weights, perm):
        return weights.float()[:, :, perm][:, :, :, perm]

    assert check_permuted_weights(permuted_float32)
    spec = EXERCISES["ch01-permuted-weights"].function
    for case, expected in spec.secret_cases(np.random.default_rng(0)):
        assert spec.same(call_with_args(permuted_float32, case), expected)


# ---- a wrong answer always gets an explanation ---------------------------------------------

ODD = [None, "abc", b"x", True, 1j, float("nan"), float("inf"), 1e300, -1.0, 0, [], [1, 2],
       [[1, 2], [3]], {"a": 1}, {1, 2}, object(), np.array([]), np.zeros((3, 3)),
       np.array([1j, 2j]), np.float32("nan"), np.array(5.0, dtype=np.float16),
       torch.tensor(float("nan")), torch.zeros(12, dtype=torch.bfloat16),
       torch.zeros(4, dtype=torch.float16), torch.zeros(2, 2, requires_grad=True),
       (1.0, float("nan")), (13000.0, float("inf")), torch.tensor([13459.0, float("inf")]),
       torch.zeros(64, 32, dtype=torch.bfloat16), np.full((10, 32), np.nan, dtype=np.float32)]


@pytest.mark.parametrize("label", sorted(CASES))
def test_odd_answers_get_a_message_not_an_exception(label):
    for answer in ODD:
        feedback = _check(label, answer)
        assert not feedback.ok, (label, answer)


def test_complex_answers_are_not_read_as_their_real_part():
    assert not check_pe_row(PE_ROW + 0j)
    assert not check_ported_query_weight(PORTED + 0j)
