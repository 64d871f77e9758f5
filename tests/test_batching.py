"""Tests of companion.batching, and of TinyDecoder on padded and packed batches.

The functions are compared with the ``transformers`` functions that define the convention;
the model's logits for every real token of a padded or packed batch are compared with those
of the same sequence run alone, for every position scheme.
"""

import pytest
import torch
from torch.distributed.tensor.experimental._context_parallel._load_balancer import _HeadTailLoadBalancer
from transformers import DataCollatorWithFlattening, LlamaConfig
from transformers.generation.utils import GenerationMixin
from transformers.masking_utils import (
    create_causal_mask,
    find_packed_sequence_indices,
    packed_sequence_mask_function,
    sdpa_mask,
)

from companion.attention import KVCache
from companion.batching import (
    attention_allowed,
    check_padding_mask,
    document_ids_from_position_ids,
    pack,
    packed_attention_mask,
    packed_labels,
    packed_position_ids,
    pad_batch,
    position_ids_from_attention_mask,
    shard_position_ids,
    token_tree,
    unpad,
)
from companion.model import ABSOLUTE, SCHEMES, ModelConfig, TinyDecoder
from companion.relative import T5RelativeBias
from companion.rope import RotaryEmbedding, apply_rope

LENGTHS = (5, 9, 3)
VOCAB = 11
# Every scheme, plus the two ways of combining an absolute table the config offers.
VARIANTS = {s: {"position": s} for s in SCHEMES} | {
    "learned-concat": {"position": "learned", "combine": "concat", "position_dim": 8},
    "sinusoidal-concat": {"position": "sinusoidal", "combine": "concat", "position_dim": 8},
    "sinusoidal-every-layer": {"position": "sinusoidal", "positions_every_layer": True},
}
RELATIVE = ("none", "t5", "rope", "alibi")  # logits depend on position differences only


def transformers_position_ids(mask):
    """What ``generate`` computes; ``self`` is not used by the method."""
    return GenerationMixin._prepare_position_ids_for_generation(None, torch.zeros_like(mask), {"attention_mask": mask})


def sequences(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, VOCAB, (n,), generator=g) for n in LENGTHS]


def model_for(variant, seed=1):
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=VOCAB, dim=32, num_heads=4, max_len=32, **VARIANTS[variant])
    return TinyDecoder(config).double().eval()


def alone(model, seqs):
    with torch.no_grad():
        return [model(s[None])[0] for s in seqs]


def padded_gap(model, seqs, side, **kwargs):
    """Largest |logit difference| over the real tokens of a padded batch vs each sequence alone."""
    tokens, mask = pad_batch(seqs, side=side)
    kwargs = {k: (mask if v == "mask" else v) for k, v in kwargs.items()}
    with torch.no_grad():
        logits = model(tokens, **kwargs)
    return max((logits[r][mask[r].bool()] - ref).abs().max().item() for r, ref in enumerate(alone(model, seqs)))


def packed_gap(model, seqs, *, document_mask=True, restart=True):
    tokens, positions = pack(seqs)
    kwargs = {"position_ids": positions if restart else torch.arange(tokens.shape[1])[None]}
    if document_mask:
        kwargs["attention_mask"] = packed_attention_mask(document_ids_from_position_ids(positions))
    with torch.no_grad():
        logits = model(tokens, **kwargs)[0]
    pieces = logits.split([len(s) for s in seqs])
    return max((piece - ref).abs().max().item() for piece, ref in zip(pieces, alone(model, seqs)))


# ---- the functions, against transformers ---------------------------------------------------------

MASKS = {
    "right": torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]),
    "left": torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]]),
    "holes": torch.tensor([[0, 1, 0, 1, 1], [1, 0, 0, 0, 1], [0, 0, 0, 0, 0]]),
}


@pytest.mark.parametrize("name", MASKS)
@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.bool])
def test_position_ids_are_those_transformers_generate_computes(name, dtype):
    mask = MASKS[name].to(dtype)
    ours = position_ids_from_attention_mask(mask)
    assert ours.dtype == torch.long
    torch.testing.assert_close(ours, transformers_position_ids(mask), rtol=0, atol=0)


def test_position_ids_by_hand():
    assert position_ids_from_attention_mask(MASKS["right"]).tolist() == [[0, 1, 2, 0, 0], [0, 1, 2, 3, 4], [0, 0, 0, 0, 0]]
    assert position_ids_from_attention_mask(MASKS["left"]).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 0, 0, 0, 0]]


POSITION_IDS = {
    "packed": torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6, 0, 1]]),
    "left padded": position_ids_from_attention_mask(MASKS["left"]),
    "jumps": torch.tensor([[3, 4, 5, 9, 10, 2, 2, 3]]),
    "one document": torch.arange(7).expand(2, 7),
}


@pytest.mark.parametrize("name", POSITION_IDS)
def test_document_ids_are_find_packed_sequence_indices(name):
    positions = POSITION_IDS[name]
    ours = document_ids_from_position_ids(positions)
    theirs = find_packed_sequence_indices(positions)
    if theirs is None:  # transformers' way of saying "nothing is packed"
        assert name == "one document"
        theirs = torch.zeros_like(positions)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_packed_ids_by_hand():
    assert packed_position_ids([3, 2, 4]).tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]
    assert packed_position_ids(torch.tensor([1, 1])).tolist() == [[0, 0]]
    docs = document_ids_from_position_ids(packed_position_ids([3, 2, 4]))
    assert docs.tolist() == [[0, 0, 0, 1, 1, 2, 2, 2, 2]]


@pytest.mark.parametrize("name", ["packed", "jumps"])
def test_packed_mask_is_transformers_mask_function_on_every_pair(name):
    docs = document_ids_from_position_ids(POSITION_IDS[name])
    ours = packed_attention_mask(docs)
    function = packed_sequence_mask_function(docs)
    b, s = docs.shape
    theirs = torch.tensor([[[bool(function(r, 0, q, k)) for k in range(s)] for q in range(s)] for r in range(b)])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    assert torch.equal(ours, ours.transpose(1, 2))


def _llama_config():
    config = LlamaConfig(hidden_size=8, num_attention_heads=2, num_hidden_layers=1, intermediate_size=8, vocab_size=10)
    config._attn_implementation = "sdpa"
    return config


@pytest.mark.parametrize("name", MASKS)
def test_allowed_pairs_are_transformers_causal_padding_mask_on_real_queries(name):
    mask = MASKS[name]
    b, s = mask.shape
    theirs = create_causal_mask(_llama_config(), torch.zeros(b, s, 8), mask, None,
                                position_ids=position_ids_from_attention_mask(mask))[:, 0]
    ours = attention_allowed(mask, s)
    real = mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], rtol=0, atol=0)
    # A padding query also sees its own key (transformers' row has no key of its own).
    eye = torch.eye(s, dtype=torch.bool).expand(b, s, s)
    torch.testing.assert_close(ours & ~theirs, eye & ~real[:, :, None], rtol=0, atol=0)
    assert not (theirs & ~ours).any()


def test_allowed_pairs_with_cached_keys_match_sdpa_mask():
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])  # 4 cached tokens, 3 new
    theirs = sdpa_mask(batch_size=2, q_length=3, kv_length=7, q_offset=4, attention_mask=mask.bool(),
                       allow_is_causal_skip=False)[:, 0]
    torch.testing.assert_close(attention_allowed(mask, 3), theirs, rtol=0, atol=0)


def test_packed_allowed_pairs_are_what_transformers_infers_from_position_ids():
    _, positions = pack(sequences())
    theirs = create_causal_mask(_llama_config(), torch.zeros(1, positions.shape[1], 8), None, None,
                                position_ids=positions)[:, 0]
    ours = attention_allowed(packed_attention_mask(document_ids_from_position_ids(positions)), positions.shape[1])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_pad_batch_and_pack_by_hand():
    tokens, mask = pad_batch([[5, 6, 7], torch.tensor([8])], side="left", pad_id=9)
    assert tokens.tolist() == [[5, 6, 7], [9, 9, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    tokens, mask = pad_batch([[5, 6, 7], [8]])
    assert tokens.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert tokens.dtype == mask.dtype == torch.long
    tokens, positions = pack([[5, 6, 7], [8], torch.tensor([1, 2])])
    assert tokens.tolist() == [[5, 6, 7, 8, 1, 2]] and positions.tolist() == [[0, 1, 2, 0, 0, 1]]
    tokens, mask = pad_batch([[5, 6, 7], [8]], side="left")
    rows = unpad(torch.stack([tokens, 10 * tokens], dim=-1), mask)  # (b, s, 2): extra dimensions are kept
    assert [r.tolist() for r in rows] == [[[5, 50], [6, 60], [7, 70]], [[8, 80]]]


@pytest.mark.parametrize("start", [0, 2])  # 2: RoBERTa-like models number from padding_idx + 1
def test_packed_labels_are_those_of_data_collator_with_flattening(start):
    seqs = sequences()
    batch = DataCollatorWithFlattening(position_ids_start=start)([{"input_ids": s.tolist()} for s in seqs])
    tokens, positions = pack(seqs)
    torch.testing.assert_close(batch["position_ids"], positions + start, rtol=0, atol=0)
    torch.testing.assert_close(packed_labels(batch["input_ids"], batch["position_ids"]), batch["labels"],
                               rtol=0, atol=0)
    other = DataCollatorWithFlattening(separator_id=-1)([{"input_ids": s.tolist()} for s in seqs])
    torch.testing.assert_close(packed_labels(tokens, positions, ignore_index=-1), other["labels"], rtol=0, atol=0)


def test_packed_labels_per_row_of_a_batch():
    tokens = torch.tensor([[5, 6, 7, 8], [1, 2, 3, 4]])
    positions = torch.tensor([[0, 1, 0, 1], [0, 1, 2, 3]])
    assert packed_labels(tokens, positions).tolist() == [[-100, 6, -100, 8], [-100, 2, 3, 4]]


@pytest.mark.parametrize("length, world_size", [(8, 2), (12, 2), (24, 3), (16, 4), (4, 1)])
def test_zigzag_shards_are_pytorchs_head_tail_load_balancer(length, world_size):
    theirs = _HeadTailLoadBalancer(length, world_size, "cpu")._generate_indices()[0].view(world_size, -1)
    for rank in range(world_size):
        torch.testing.assert_close(shard_position_ids(length, world_size, rank, layout="zigzag"),
                                   theirs[rank].long(), rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
def test_shards_cover_the_sequence_once(layout):
    shards = [shard_position_ids(12, 3 if layout == "contiguous" else 2, r, layout=layout)
              for r in range(3 if layout == "contiguous" else 2)]
    assert sorted(torch.cat(shards).tolist()) == list(range(12))
    if layout == "contiguous":
        for rank, shard in enumerate(shards):
            torch.testing.assert_close(shard, torch.arange(12).chunk(3)[rank], rtol=0, atol=0)


def test_token_tree_depths_and_ancestors():
    depths, allowed = token_tree([-1, -1, 0, 1, 2])
    assert depths.tolist() == [0, 0, 1, 1, 2]
    assert allowed.int().tolist() == [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 0, 1, 0, 0], [0, 1, 0, 1, 0],
                                      [1, 0, 1, 0, 1]]
    depths, allowed = token_tree(torch.tensor([-1, 0, 1]))  # a chain is an ordinary causal row
    assert depths.tolist() == [0, 1, 2]
    torch.testing.assert_close(allowed, torch.ones(3, 3, dtype=torch.bool).tril(), rtol=0, atol=0)


# ---- the model: every real token gets the logits it has alone ----------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_right_padding_left_padding_and_packing_give_the_logits_of_each_sequence_alone(variant):
    model, seqs = model_for(variant), sequences()
    assert padded_gap(model, seqs, "right", attention_mask="mask") < 1e-12
    assert padded_gap(model, seqs, "left", attention_mask="mask") < 1e-12  # positions from the mask
    assert packed_gap(model, seqs) < 1e-12


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decoding_of_a_left_padded_batch_equals_the_full_forward(variant):
    model, seqs = model_for(variant), sequences()
    tokens, mask = pad_batch(seqs, side="left")
    with torch.no_grad():
        full = model(tokens, attention_mask=mask)
        cache = model.new_cache()
        pieces = [model(tokens[:, :4], attention_mask=mask[:, :4], cache=cache)]  # prefill
        for i in range(4, 7):  # one token at a time; the mask covers cached and new tokens
            pieces.append(model(tokens[:, i : i + 1], attention_mask=mask[:, : i + 1], cache=cache))
        pieces.append(model(tokens[:, 7:], attention_mask=mask, cache=cache))  # a chunk
    real = mask.bool()
    torch.testing.assert_close(torch.cat(pieces, dim=1)[real], full[real], rtol=0, atol=1e-12)
    assert len(cache[0]) == tokens.shape[1]
    torch.testing.assert_close(cache[0].positions, position_ids_from_attention_mask(mask), rtol=0, atol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_generating_past_the_prompts_keeps_each_row_its_own(variant):
    """Greedy steps after a left-padded prompt give each row what it gives alone."""
    model, seqs = model_for(variant), sequences()
    tokens, mask = pad_batch(seqs, side="left")
    new = torch.tensor([[3], [4], [5]])
    with torch.no_grad():
        cache = model.new_cache()
        model(tokens, attention_mask=mask, cache=cache)
        mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=1)
        step = model(new, attention_mask=mask, cache=cache)[:, 0]
        for r, seq in enumerate(seqs):
            own = model(torch.cat([seq, new[r]])[None])[0, -1]
            torch.testing.assert_close(step[r], own, rtol=0, atol=1e-12)


# ---- which mistakes are silent, and for which schemes --------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_left_padding_without_position_ids_shifts_absolute_schemes_only(variant):
    model, seqs = model_for(variant), sequences()
    tokens, _ = pad_batch(seqs, side="left")
    counting = torch.arange(tokens.shape[1]).expand_as(tokens)  # positions 0..s-1, padding counted
    gap = padded_gap(model, seqs, "left", attention_mask="mask", position_ids=counting)
    if VARIANTS[variant]["position"] in ABSOLUTE:
        assert gap > 1e-3
    else:
        assert gap < 1e-12


@pytest.mark.parametrize("variant", VARIANTS)
def test_left_padding_without_a_mask_is_wrong_for_every_scheme(variant):
    model, seqs = model_for(variant), sequences()
    assert padded_gap(model, seqs, "left") > 1e-3


@pytest.mark.parametrize("variant", VARIANTS)
def test_right_padding_needs_nothing_in_a_causal_model(variant):
    """Padding comes after every real token, so the causal mask already hides it."""
    model, seqs = model_for(variant), sequences()
    assert padded_gap(model, seqs, "right") < 1e-12


@pytest.mark.parametrize("variant", VARIANTS)
def test_packing_without_the_document_mask_leaks_for_every_scheme(variant):
    assert packed_gap(model_for(variant), sequences(), document_mask=False) > 1e-3


@pytest.mark.parametrize("variant", VARIANTS)
def test_packing_without_restarting_positions_shifts_absolute_schemes_only(variant):
    gap = packed_gap(model_for(variant), sequences(), restart=False)
    if VARIANTS[variant]["position"] in ABSOLUTE:
        assert gap > 1e-3
    else:
        assert gap < 1e-12


# ---- the plain forward is untouched; padding stays finite; training works ----------------------

@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_plain_forward_equals_an_all_ones_mask(scheme):
    model, tokens = model_for(scheme), torch.randint(0, VOCAB, (2, 12))
    with torch.no_grad():
        plain = model(tokens)
        torch.testing.assert_close(model(tokens, attention_mask=torch.ones(2, 12, dtype=torch.long)), plain, rtol=0, atol=1e-12)
        torch.testing.assert_close(model(tokens, position_ids=torch.arange(12).expand(2, 12)), plain,
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_padding_queries_are_finite(scheme):
    model = model_for(scheme)
    tokens = torch.randint(0, VOCAB, (2, 6))
    mask = torch.tensor([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]])
    with torch.no_grad():
        assert torch.isfinite(model(tokens, attention_mask=mask)).all()


@pytest.mark.parametrize("variant", ["learned", "t5", "learned-concat"])
def test_a_packed_batch_trains(variant):
    model = model_for(variant).train()
    tokens, positions = pack(sequences())
    mask = packed_attention_mask(document_ids_from_position_ids(positions))
    model(tokens, attention_mask=mask, position_ids=positions).logsumexp(-1).sum().backward()
    if VARIANTS[variant]["position"] == "learned":
        grad = model.position.table.grad
        used = int(positions.max()) + 1
        assert grad[:used].abs().sum(-1).gt(0).all() and grad[used:].eq(0).all()  # only rows it used


# ---- the pieces the model uses: RoPE, T5 bias and the cache per batch row ----------------------

def test_rope_rotates_each_row_at_its_own_positions():
    rope = RotaryEmbedding(8)
    x = torch.randn(3, 2, 5, 8, dtype=torch.float64)
    positions = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [7, 8, 9, 0, 1]])
    rows = torch.stack([rope.rotate(x[r], positions[r]) for r in range(3)])
    torch.testing.assert_close(rope.rotate(x, positions), rows, rtol=0, atol=0)
    torch.testing.assert_close(apply_rope(x, positions), rows, rtol=0, atol=1e-12)
    q, k = rope(x, x, positions)
    torch.testing.assert_close(q, rows, rtol=0, atol=0)
    q, _ = rope(x[:, :, 3:], x, q_positions=positions[:, 3:], k_positions=positions)
    torch.testing.assert_close(q, rows[:, :, 3:], rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"or \(batch, seq\) = \(3, 5\)"):
        rope.rotate(x, positions[:2])


def test_t5_bias_from_offsets_is_the_aligned_bias_and_works_per_row():
    torch.manual_seed(0)
    t5 = T5RelativeBias(4, bidirectional=False, num_buckets=8, max_distance=20)
    queries, keys = torch.arange(4, 9), torch.arange(9)
    torch.testing.assert_close(t5.from_offsets(keys[None] - queries[:, None]), t5(5, 9), rtol=0, atol=0)
    offsets = torch.stack([keys[None] - queries[:, None], keys[None] - queries[:, None] - 3])  # (2, q, k)
    both = t5.from_offsets(offsets)
    assert both.shape == (2, 4, 5, 9)
    torch.testing.assert_close(both[0], t5(5, 9), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"\(\.\.\., q, k\)"):
        t5.from_offsets(torch.arange(3))


def test_the_cache_stores_key_positions_per_row():
    cache = KVCache()
    assert cache.positions is None
    cache.append(torch.zeros(2, 1, 3, 4), torch.zeros(2, 1, 3, 4))  # default: 0, 1, 2
    cache.append(torch.zeros(2, 1, 2, 4), torch.zeros(2, 1, 2, 4), torch.tensor([[0, 1], [5, 6]]))
    cache.append(torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4))  # default continues from len = 5
    assert len(cache) == 6
    assert cache.positions.tolist() == [[0, 1, 2, 0, 1, 5], [0, 1, 2, 5, 6, 5]]
    with pytest.raises(ValueError, match=r"positions must have shape \(1,\) or \(2, 1\)"):
        cache.append(torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4), torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="integer"):
        cache.append(torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4), torch.tensor([1.0]))


# ---- bad inputs: clear errors ---------------------------------------------------------------------

@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"attention_mask": torch.ones(3, 7)}, ValueError, r"must be \(batch, cached \+ new tokens\) = \(3, 6\)"),
        ({"attention_mask": torch.ones(3, 6, 5, dtype=torch.bool)}, ValueError, r"= \(3, 6, 6\), got shape"),
        ({"attention_mask": torch.full((3, 6), 2)}, ValueError, "1 for a real token and 0 for padding"),
        ({"attention_mask": torch.ones(3, 6) * 0.5}, TypeError, "integers or booleans"),
        ({"attention_mask": torch.ones(3, 6, 6, dtype=torch.long)}, TypeError, "must be bool"),
        ({"attention_mask": [[1] * 6] * 3}, TypeError, "attention_mask must be a torch.Tensor"),
        ({"position_ids": torch.arange(6)}, ValueError, r"\(3, 6\) like tokens.*unsqueeze"),
        ({"position_ids": torch.zeros(3, 5, dtype=torch.long)}, ValueError, r"\(batch, new tokens\) = \(3, 6\)"),
        ({"position_ids": torch.zeros(3, 6)}, TypeError, "position_ids must be integers"),
        ({"position_ids": torch.full((3, 6), -1)}, ValueError, "non-negative"),
        ({"position_ids": torch.full((3, 6), 8)}, ValueError, "positions up to 8 need a table of 9 rows, but max_len=8"),
    ],
)
def test_bad_batch_inputs(kwargs, error, words):
    model = TinyDecoder(ModelConfig(vocab_size=5, dim=16, num_heads=2, position="learned", max_len=8))
    with pytest.raises(error, match=words):
        model(torch.zeros(3, 6, dtype=torch.long), **kwargs)


def test_with_a_cache_the_mask_must_cover_the_cached_tokens():
    model = TinyDecoder(ModelConfig(vocab_size=5, dim=16, num_heads=2, position="alibi"))
    cache = model.new_cache()
    model(torch.zeros(2, 4, dtype=torch.long), attention_mask=torch.ones(2, 4, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"= \(2, 5\) of 0/1.*covers the cached tokens too"):
        model(torch.zeros(2, 1, dtype=torch.long), attention_mask=torch.ones(2, 1, dtype=torch.long), cache=cache)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: position_ids_from_attention_mask([[1, 0]]), TypeError, r"attention_mask must be a torch.Tensor.*torch.tensor"),
        (lambda: position_ids_from_attention_mask(torch.ones(4, dtype=torch.long)), ValueError, "unsqueeze"),
        (lambda: position_ids_from_attention_mask(torch.ones(2, 0, dtype=torch.long)), ValueError, "empty"),
        (lambda: position_ids_from_attention_mask(torch.tensor([[1, 3]])), ValueError, r"got values \[1, 3\]"),
        (lambda: check_padding_mask(torch.ones(1, 2)), TypeError, r"\.long\(\)"),
        (lambda: document_ids_from_position_ids(torch.ones(1, 3, dtype=torch.bool)), TypeError, "position_ids must hold integers"),
        (lambda: document_ids_from_position_ids(torch.zeros(1, 2, 3, dtype=torch.long)), ValueError, "2 dimensions"),
        (lambda: packed_position_ids([]), ValueError, "lengths is empty"),
        (lambda: packed_position_ids([3, 0]), ValueError, r"lengths\[1\] must be a positive integer"),
        (lambda: packed_position_ids([2.0]), TypeError, r"lengths\[0\] must be an integer"),
        (lambda: packed_position_ids(5), TypeError, "list of positive ints"),
        (lambda: packed_attention_mask(torch.zeros(4, dtype=torch.long)), ValueError, "unsqueeze"),
        (lambda: pad_batch([]), ValueError, "sequences is empty"),
        (lambda: pad_batch([[1, 2], []]), ValueError, r"sequences\[1\] is empty"),
        (lambda: pad_batch(torch.ones(2, 3, dtype=torch.long)), TypeError, "list of token sequences"),
        (lambda: pad_batch([[1.5, 2]]), TypeError, r"sequences\[0\] must be a 1-D integer tensor"),
        (lambda: pad_batch([torch.ones(2, 2, dtype=torch.long)]), ValueError, "must be 1-D"),
        (lambda: pad_batch([[1, 2]], side="middle"), ValueError, "side must be one of 'right', 'left'"),
        (lambda: pad_batch([[1, 2]], pad_id=True), TypeError, "pad_id must be an integer"),
        (lambda: pack([torch.ones(2)]), TypeError, r"sequences\[0\] must hold integer token ids"),
        (lambda: attention_allowed(torch.ones(2, 3, dtype=torch.long), 4), ValueError, "fewer than the q_len=4"),
        (lambda: attention_allowed(torch.ones(2, 2, 3, dtype=torch.bool), 3), ValueError, r"\(batch, 3, keys\)"),
        (lambda: attention_allowed(torch.ones(3, dtype=torch.long), 3), ValueError, r"\(batch, keys\)"),
        (lambda: unpad(torch.zeros(2, 4, 3), torch.ones(2, 5, dtype=torch.long)), ValueError, r"\(2, 5\) \+ \(\.\.\.\)"),
        (lambda: packed_labels(torch.ones(1, 3, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long)), ValueError,
         r"same shape as input_ids \(1, 3\)"),
        (lambda: packed_labels(torch.ones(1, 3, dtype=torch.long), [[0, 1, 2]]), TypeError,
         "position_ids must be a torch.Tensor"),
        (lambda: packed_labels(torch.ones(1, 3), torch.zeros(1, 3, dtype=torch.long)), TypeError, "input_ids must hold"),
        (lambda: packed_labels(torch.ones(1, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long), ignore_index=0.5),
         TypeError, "ignore_index must be an integer"),
        (lambda: shard_position_ids(10, 4, 0), ValueError, r"not a multiple of 4; pad the sequence to 12"),
        (lambda: shard_position_ids(12, 4, 0, layout="zigzag"), ValueError, r"8 equal pieces.*to 16 tokens"),
        (lambda: shard_position_ids(12, 2, 2), ValueError, r"rank must be in 0 \.\. world_size - 1 = 1"),
        (lambda: shard_position_ids(12, 2, 0, layout="ring"), ValueError, "layout must be one of 'contiguous'"),
        (lambda: shard_position_ids(12, 0, 0), ValueError, "world_size must be a positive integer"),
        (lambda: token_tree([]), TypeError, "non-empty list"),
        (lambda: token_tree([-1, 1]), ValueError, r"parents\[1\] must be -1 or the index of an earlier"),
        (lambda: token_tree([-1, 0.0]), TypeError, r"parents\[1\] must be an integer"),
    ],
)
def test_bad_arguments_of_the_functions(call, error, words):
    with pytest.raises(error, match=words):
        call()
