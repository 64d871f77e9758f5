"""The position doctor on tiny random models of several architectures: a healthy model
has no failed check, and each injected bug is caught by the check named for it."""

import json
import subprocess
import sys

import pytest
import torch
import transformers
from transformers import (
    AutoModelForCausalLM,
    BloomConfig,
    Gemma3TextConfig,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    Phi3Config,
    Qwen2Config,
)

from companion import doctor
from companion.model import ModelConfig, TinyDecoder

transformers.logging.set_verbosity_error()

SMALL = {
    "vocab_size": 100,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
LONGROPE = {"type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
CONFIGS = {
    "llama": lambda: LlamaConfig(**SMALL),
    "gpt2": lambda: GPT2Config(
        vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64, **IDS
    ),
    "qwen2": lambda: Qwen2Config(**SMALL),
    "mistral-window": lambda: MistralConfig(**SMALL, sliding_window=4),
    "gemma3": lambda: Gemma3TextConfig(
        **{**SMALL, "num_hidden_layers": 3},
        head_dim=8,
        sliding_window=4,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    ),
    "phi3-longrope": lambda: Phi3Config(
        **SMALL, original_max_position_embeddings=16, rope_scaling=LONGROPE
    ),
    "llama-dynamic": lambda: LlamaConfig(
        **{**SMALL, "max_position_embeddings": 16},
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4},
    ),
    "bloom": lambda: BloomConfig(
        vocab_size=100, hidden_size=32, n_layer=2, n_head=4, **IDS
    ),
}


def build(name):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(CONFIGS[name]()).eval()


def by_check(findings):
    return {f.check: f for f in findings}


@pytest.fixture(scope="module")
def healthy():
    return {name: by_check(doctor.diagnose(build(name))) for name in CONFIGS}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_healthy_model_fails_no_check(healthy, name):
    findings = healthy[name]
    assert set(findings) == set(doctor.CHECKS)
    failed = [str(f) for f in findings.values() if f.status == "fail"]
    assert not failed, failed
    for check in (
        "right-padded batch",
        "left-padded batch, generate",
        "cached decoding",
        "chunked prefill",
    ):
        assert findings[check].status == "pass", str(findings[check])


def test_a_plain_forward_on_a_left_padded_batch_is_wrong_for_a_learned_table_only(
    healthy,
):
    gpt2 = healthy["gpt2"]["left-padded batch, forward"]
    assert gpt2.status == "warn" and gpt2.value > 0.01, str(gpt2)
    assert "position_ids" in gpt2.detail
    for name in ("llama", "qwen2", "bloom"):  # RoPE is relative; BLOOM counts the mask
        assert healthy[name]["left-padded batch, forward"].status == "pass", name


def test_packing_with_the_default_use_cache_leaks(healthy):
    for name in ("llama", "qwen2", "mistral-window", "gpt2"):
        assert healthy[name]["packed batch"].status == "pass", name
        leak = healthy[name]["packed batch, default call"]
        assert leak.status == "warn" and leak.value > 0.01, str(leak)
        assert "use_cache=False" in leak.detail


def test_architecture_specific_checks_run_where_they_apply(healthy):
    assert healthy["mistral-window"]["sliding window"].status == "pass"
    assert healthy["gemma3"]["sliding window"].status == "pass"
    assert healthy["llama"]["sliding window"].status == "skip"
    for name in ("llama-dynamic", "phi3-longrope"):
        assert healthy[name]["dynamic scaling"].status == "warn", name
    assert healthy["llama"]["dynamic scaling"].status == "skip"
    assert healthy["bloom"]["packed batch"].status == "skip"  # no position_ids
    assert healthy["bloom"]["float64 reference"].status == "warn"  # NaN in float64


@pytest.mark.parametrize("name", ["llama", "gemma3", "phi3-longrope"])
def test_bfloat16_position_buffers_are_caught(name):
    model = build(name).to(torch.bfloat16)
    found = by_check(doctor.diagnose(model, checks=["position buffers"]))
    buffers = found["position buffers"]
    assert buffers.status == "fail", str(buffers)
    assert "inv_freq is bfloat16" in buffers.detail and buffers.value > 0


@pytest.mark.parametrize("name", ["llama", "gemma3", "phi3-longrope", "llama-dynamic"])
def test_restore_position_buffers_undoes_a_bfloat16_cast(name):
    model = build(name)
    before = {n: b.clone() for n, b in model.named_buffers() if "inv_freq" in n}
    model.to(torch.bfloat16)
    restored = doctor.restore_position_buffers(model)
    assert sorted(restored) == sorted(before)
    after = dict(model.named_buffers())
    for n, b in before.items():
        assert after[n].dtype == torch.float32 and torch.equal(after[n], b), n
    assert doctor.check_position_buffers(model).status == "pass"


def test_bfloat16_inv_freq_is_radians_off_at_position_1000():
    config = LlamaConfig(
        **{
            **SMALL,
            "hidden_size": 128,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
        },
        rope_parameters={"rope_type": "default", "rope_theta": 5e5},
    )
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    finding = doctor.check_position_buffers(model, position=1000)
    assert 1.0 < finding.value < 3.0, finding  # 1.8 rad for head size 128, base 5e5


def test_a_float32_model_passes_the_buffer_check(healthy):
    assert healthy["llama"]["position buffers"].status == "pass"
    assert healthy["gpt2"]["position buffers"].status == "skip"  # a learned table


def test_dropped_positions_are_caught_by_cached_decoding(monkeypatch):
    from transformers.models.llama import modeling_llama

    original = modeling_llama.LlamaRotaryEmbedding.forward

    def drop(self, x, position_ids):  # every call numbers its tokens from 0
        return original(self, x, torch.arange(x.shape[1])[None])

    monkeypatch.setattr(modeling_llama.LlamaRotaryEmbedding, "forward", drop)
    found = by_check(doctor.diagnose(build("llama")))
    assert found["cached decoding"].status == "fail", str(found["cached decoding"])
    assert found["chunked prefill"].status == "fail"
    assert found["left-padded batch, generate"].status == "fail"


def test_dropped_positions_in_a_learned_table_are_caught(monkeypatch):
    from transformers.models.gpt2 import modeling_gpt2

    original = modeling_gpt2.GPT2Model.forward

    def drop(self, *args, position_ids=None, **kwargs):
        return original(self, *args, **kwargs)

    monkeypatch.setattr(modeling_gpt2.GPT2Model, "forward", drop)
    found = by_check(doctor.diagnose(build("gpt2")))
    assert found["left-padded batch, generate"].status == "fail"
    assert found["packed batch"].status == "fail"


def test_a_mask_that_lets_documents_leak_is_caught(monkeypatch):
    from transformers import masking_utils

    monkeypatch.setattr(
        masking_utils, "find_packed_sequence_indices", lambda *a, **k: None
    )
    found = by_check(doctor.diagnose(build("llama"), checks=["packed batch"]))
    assert found["packed batch"].status == "fail", str(found["packed batch"])


def tiny(position, **kwargs):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=50,
        dim=32,
        num_heads=4,
        num_layers=2,
        max_len=64,
        position=position,
        **kwargs,
    )
    return TinyDecoder(config).eval()


@pytest.mark.parametrize(
    "position", ["rope", "learned", "sinusoidal", "alibi", "t5", "none"]
)
def test_the_tiny_decoder_is_healthy(position):
    found = by_check(doctor.diagnose(tiny(position)))
    assert not [f for f in found.values() if f.status == "fail"], found
    assert found["packed batch"].status == "pass"
    assert found["packed batch, default call"].status == "warn"  # needs its mask


def test_the_tiny_decoder_with_a_window_passes_the_window_check():
    found = by_check(doctor.diagnose(tiny("rope", rope_window=4)))
    assert found["sliding window"].status == "pass", str(found["sliding window"])


def test_the_tiny_decoder_with_dropped_cache_positions_fails(monkeypatch):
    model = tiny("learned")
    add = model._add_positions
    monkeypatch.setattr(model, "_add_positions", lambda x, start: add(x, 0))
    found = by_check(doctor.diagnose(model))
    assert found["cached decoding"].status == "fail"
    assert found["chunked prefill"].status == "fail"


def test_bfloat16_tables_warn_and_bfloat16_slopes_fail():
    # A table of values is rounded once; a slope multiplies the distance.
    found = doctor.check_position_buffers(tiny("sinusoidal").to(torch.bfloat16))
    assert found.status == "warn" and "bfloat16" in found.detail
    found = doctor.check_position_buffers(tiny("alibi").to(torch.bfloat16))
    assert found.status == "fail" and "alibi_slopes is bfloat16" in found.detail


def test_the_report_has_one_line_per_check_and_a_summary(healthy):
    text = doctor.report(list(healthy["gpt2"].values()), title="gpt2")
    lines = text.splitlines()
    heads = [line for line in lines if line[:4] in ("PASS", "FAIL", "WARN", "SKIP")]
    assert lines[0] == "gpt2" and len(heads) == len(doctor.CHECKS)
    assert max(len(line) for line in lines) <= 88
    assert lines[-1].startswith("0 failed, 2 warning(s)")


def test_bad_input_gets_a_clear_error():
    with pytest.raises(TypeError, match="model must be"):
        doctor.diagnose("gpt2")
    with pytest.raises(ValueError, match="lengths must be"):
        doctor.diagnose(tiny("rope"), lengths=(4, 4))
    with pytest.raises(ValueError, match="unknown checks"):
        doctor.diagnose(tiny("rope"), checks=["positions"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        doctor.load("no/such/folder")


def test_the_command_line_runs_on_a_config_and_on_a_checkpoint(tmp_path, capsys):
    config_dir = tmp_path / "config"
    CONFIGS["llama"]().save_pretrained(config_dir)
    assert json.loads((config_dir / "config.json").read_text())["model_type"] == "llama"
    assert doctor.main([str(config_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Position doctor: LlamaForCausalLM") and "0 failed" in out
    assert "random weights from the config" in out.splitlines()[0]
    checkpoint = tmp_path / "checkpoint"
    build("gpt2").save_pretrained(checkpoint)
    assert doctor.main([str(checkpoint), "--dtype", "bfloat16"]) == 0
    assert "bfloat16" in capsys.readouterr().out


def test_python_dash_m_on_a_bfloat16_checkpoint(tmp_path):
    checkpoint = tmp_path / "bf16"
    build("llama").to(torch.bfloat16).save_pretrained(checkpoint)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "companion.doctor",
            str(checkpoint),
            "--dtype",
            "bfloat16",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    # from_pretrained(dtype=torch.bfloat16) keeps the buffers float32: the model passes.
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  position buffers:" in done.stdout
    assert "PASS  float64 reference:" in done.stdout  # bfloat16 within its rounding
    assert "checkpoint weights" in done.stdout


def test_the_command_line_exits_1_on_a_failed_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        doctor, "load", lambda *a, **k: build("llama").to(torch.bfloat16)
    )
    assert doctor.main(["anything"]) == 1
    assert "FAIL  position buffers:" in capsys.readouterr().out


def test_a_bug_only_in_the_bfloat16_code_path_fails_the_reference(monkeypatch):
    from transformers.models.llama import modeling_llama

    original = modeling_llama.LlamaRotaryEmbedding.forward

    def low_precision_drop(self, x, position_ids):
        if x.dtype in (torch.bfloat16, torch.float16):
            position_ids = torch.zeros_like(position_ids)
        return original(self, x, position_ids)

    torch.manual_seed(0)
    config = LlamaConfig(**SMALL, initializer_range=0.5)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    assert by_check(doctor.diagnose(model))["float64 reference"].status == "pass"
    monkeypatch.setattr(
        modeling_llama.LlamaRotaryEmbedding, "forward", low_precision_drop
    )
    found = by_check(doctor.diagnose(model))
    assert found["float64 reference"].status == "fail", str(found["float64 reference"])


def test_an_off_by_one_in_decode_steps_only_is_caught(monkeypatch):
    from transformers.models.llama import modeling_llama

    original = modeling_llama.LlamaRotaryEmbedding.forward

    def off_by_one_when_decoding(self, x, position_ids):
        if position_ids.shape[-1] == 1:
            position_ids = position_ids + 1
        return original(self, x, position_ids)

    monkeypatch.setattr(
        modeling_llama.LlamaRotaryEmbedding, "forward", off_by_one_when_decoding
    )
    found = by_check(doctor.diagnose(build("llama")))
    assert found["cached decoding"].status == "fail", str(found["cached decoding"])
    assert found["left-padded batch, generate"].status == "fail"


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_position_bug_inside_generate_is_caught(monkeypatch, name):
    from transformers.generation.utils import GenerationMixin

    original = GenerationMixin._update_model_kwargs_for_generation

    def skip_one(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if out.get("position_ids") is not None:
            out["position_ids"] = out["position_ids"].clone()
            out["position_ids"][..., -1] += 1
        return out

    monkeypatch.setattr(
        GenerationMixin, "_update_model_kwargs_for_generation", skip_one
    )
    found = by_check(doctor.diagnose(build(name)))
    generate = found["left-padded batch, generate"]
    assert generate.status == "fail", str(generate)


def test_an_ignored_padding_mask_fails_the_left_padded_forward(monkeypatch):
    from transformers import masking_utils

    def everything(padding_mask):
        return lambda b, h, q, k: torch.ones_like(q, dtype=torch.bool)

    monkeypatch.setattr(masking_utils, "padding_mask_function", everything)
    found = by_check(doctor.diagnose(build("llama")))
    left = found["left-padded batch, forward"]
    assert left.status == "fail" and "padding mask" in left.detail, str(left)


def test_something_that_crosses_the_batch_fails_the_right_padded_check():
    model = build("llama")
    # A layer with batch statistics: each row minus the batch's mean.
    model.model.norm.register_forward_pre_hook(
        lambda module, args: (args[0] - args[0].mean(0, keepdim=True),)
    )
    found = by_check(doctor.diagnose(model, checks=["right-padded batch"]))
    assert found["right-padded batch"].status == "fail"


def test_a_sliding_cache_one_key_short_fails_the_window_check(monkeypatch):
    from transformers import cache_utils

    original = cache_utils.DynamicSlidingWindowLayer.__init__

    def narrow(self, sliding_window, **kwargs):
        original(self, sliding_window - 1, **kwargs)

    monkeypatch.setattr(cache_utils.DynamicSlidingWindowLayer, "__init__", narrow)
    found = by_check(
        doctor.diagnose(build("mistral-window"), checks=["sliding window"])
    )
    assert found["sliding window"].status == "fail", str(found["sliding window"])


def test_non_finite_logits_fail_the_reference():
    model = build("llama").to(torch.bfloat16)
    model.lm_head.register_forward_hook(
        lambda module, args, out: (
            out * float("nan") if out.dtype == torch.bfloat16 else out
        )
    )
    found = by_check(doctor.diagnose(model, checks=["float64 reference"]))
    assert found["float64 reference"].status == "fail"


def test_a_model_that_never_infers_documents_warns_with_a_fix_that_works():
    torch.manual_seed(0)
    opt = AutoModelForCausalLM.from_config(
        transformers.OPTConfig(
            vocab_size=100,
            hidden_size=32,
            ffn_dim=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
            **IDS,
        )
    ).eval()
    found = by_check(doctor.diagnose(opt))
    assert not [f for f in found.values() if f.status == "fail"], found
    packed = found["packed batch"]
    assert packed.status == "warn" and "never infers documents" in packed.detail
    assert "use_cache=False" not in packed.detail
    assert found["packed batch, default call"].status == "skip"


def test_the_dynamic_check_takes_the_shortest_prompt_and_lengths_stay_below_the_switch():
    model = build("phi3-longrope")
    found = by_check(
        doctor.diagnose(model, lengths=(12, 5, 9), checks="dynamic scaling")
    )
    assert found["dynamic scaling"].status == "warn"
    assert "a 5-token prompt" in found["dynamic scaling"].detail
    with pytest.raises(ValueError, match="switch|frequencies"):
        doctor.diagnose(model, lengths=(20, 5, 9))


def test_buffers_it_cannot_recompute_get_another_fix():
    found = doctor.check_position_buffers(tiny("alibi").to(torch.bfloat16))
    assert found.status == "fail" and "restore_position_buffers" not in found.detail
    assert "rebuild the model in float32" in found.detail


def test_the_command_line_takes_longer_lengths(tmp_path, capsys):
    config_dir = tmp_path / "config"
    CONFIGS["mistral-window"]().save_pretrained(config_dir)
    assert doctor.main([str(config_dir), "--lengths", "30,12,20"]) == 0
    assert "prefill of 15 tokens" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        doctor.main([str(config_dir), "--lengths", "300,12", "--max-tokens", "256"])


def test_wrong_kinds_of_model_get_a_clear_error():
    config = LlamaConfig(**SMALL)
    with pytest.raises(TypeError, match="ForCausalLM"):
        doctor.diagnose(transformers.LlamaModel(config))
    t5 = transformers.T5ForConditionalGeneration(
        transformers.T5Config(
            vocab_size=100, d_model=32, d_ff=64, num_layers=1, num_heads=4, d_kv=8
        )
    )
    with pytest.raises(ValueError, match="encoder-decoder"):
        doctor.diagnose(t5)
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    with pytest.raises(ValueError, match="meta"):
        doctor.diagnose(meta)
    with pytest.raises(ValueError, match="reference_dtype"):
        doctor.diagnose(tiny("rope"), reference_dtype="float8")
    with pytest.raises(ValueError, match="max_tokens"):
        doctor.diagnose(tiny("rope"), max_tokens=5)


def test_a_float32_reference_runs_with_a_looser_tolerance():
    found = by_check(doctor.diagnose(build("llama"), reference_dtype="float32"))
    assert (
        found["float64 reference"].status == "skip"
    )  # a float32 model, a float32 copy
    assert "within 1e-04" in found["right-padded batch"].detail


def test_the_command_line_refuses_bad_options(capsys):
    with pytest.raises(SystemExit):
        doctor.main(["x", "--dtype", "bf16"])
    with pytest.raises(SystemExit):
        doctor.main(["no/such/path"])
    assert "does not exist" in capsys.readouterr().err
