"""scripts/make_default_model.py and the bundle it wrote to models/default/.

The checked-in files must be exactly what the script writes (so they are
reproducible and never edited by hand), match docs/bundles.md, hold every
tensor in the documented layout, and make a model whose logits are neither
flat nor one-hot.
"""
import json
import math
import pathlib
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file

from test_vq_decoder import VQGAN

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "models" / "default"
FILES = ("bundle.json", "model.safetensors", "vqgan.safetensors")


def generate(out, seed=None):
    cmd = [sys.executable, str(ROOT / "scripts" / "make_default_model.py"), "--out", str(out)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return {name: (out / name).read_bytes() for name in FILES}


@pytest.fixture(scope="module")
def bundle():
    return json.loads((DEFAULT / "bundle.json").read_text())


def test_checked_in_files_are_what_the_script_writes(tmp_path):
    fresh = generate(tmp_path / "a")  # default seed 0
    for name in FILES:
        assert fresh[name] == (DEFAULT / name).read_bytes(), f"models/default/{name} is stale: rerun the script"


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path):
    first, again, other = generate(tmp_path / "a", 7), generate(tmp_path / "b", 7), generate(tmp_path / "c", 8)
    assert first == again
    assert first["bundle.json"] == other["bundle.json"]
    assert first["model.safetensors"] != other["model.safetensors"]
    assert first["vqgan.safetensors"] != other["vqgan.safetensors"]


def test_bundle_json_is_the_documented_schema_example(bundle):
    docs = (ROOT / "docs" / "bundles.md").read_text()
    example = re.search(r"```json\n(.*?)\n```", docs, re.S).group(1)
    assert bundle == json.loads(example)


def test_total_size_stays_small():
    # The documented architecture in float32 is ~3.3 MB (the VQ decoder ~2.6 MB).
    assert sum((DEFAULT / name).stat().st_size for name in FILES) < 3.5e6


def expected_transformer_shapes(t):
    v, h, i, d = t["vocab_size"], t["hidden_size"], t["intermediate_size"], t["head_dim"]
    q_rows, kv_rows = t["num_heads"] * d, t["num_kv_heads"] * d
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h], "lm_head.weight": [v, h]}
    for n in range(t["num_layers"]):
        p = f"model.layers.{n}."
        shapes.update({
            p + "self_attn.q_proj.weight": [q_rows, h], p + "self_attn.k_proj.weight": [kv_rows, h],
            p + "self_attn.v_proj.weight": [kv_rows, h], p + "self_attn.o_proj.weight": [h, q_rows],
            p + "self_attn.q_norm.weight": [1, d], p + "self_attn.q_norm.bias": [1, d],
            p + "self_attn.k_norm.weight": [1, d], p + "self_attn.k_norm.bias": [1, d],
            p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h], p + "mlp.down_proj.weight": [h, i],
            p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
        })
    return shapes


def file_shapes(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}


def test_transformer_tensors_match_the_documented_layout(bundle):
    t = bundle["transformer"]
    assert (t["vocab_size"], t["hidden_size"], t["num_layers"], t["num_heads"], t["head_dim"]) == (560, 64, 2, 4, 16)
    found = file_shapes(DEFAULT / "model.safetensors")
    assert {k: ("F32", s) for k, s in expected_transformer_shapes(t).items()} == found


def test_vq_tensors_load_strictly_into_the_reference_decoder(bundle):
    found = file_shapes(DEFAULT / "vqgan.safetensors")
    assert all(dtype == "F32" for dtype, _ in found.values())
    reference = VQGAN(bundle["vq"])
    expected = {k: list(v.shape) for k, v in reference.state_dict().items()}
    assert expected == {k: shape for k, (_, shape) in found.items()}
    assert found["quantize.embedding.weight"][1] == [256, 16]


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half_rope(x, theta):
    # x [heads, T, d]: pairs (i, i + d/2) rotate by position * theta^(-2i/d).
    d, t = x.shape[-1], x.shape[-2]
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * freqs[None, :]
    cos, sin = torch.cat([angles.cos()] * 2, -1).float(), torch.cat([angles.sin()] * 2, -1).float()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def chameleon_logits(w, t, ids):
    """A plain Chameleon-architecture forward (qk-norm before RoPE), [T] ids -> [T, V] logits."""
    heads, d, eps = t["num_heads"], t["head_dim"], t["norm_eps"]
    x = w["model.embed_tokens.weight"][ids]
    n_tok = len(ids)
    for n in range(t["num_layers"]):
        p = f"model.layers.{n}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q, k, v = (a @ w[p + f"self_attn.{m}_proj.weight"].T for m in "qkv")
        q, k, v = (z.view(n_tok, heads, d) for z in (q, k, v))
        q = F.layer_norm(q, [d], eps=t["qk_norm_eps"]) * w[p + "self_attn.q_norm.weight"] + w[p + "self_attn.q_norm.bias"]
        k = F.layer_norm(k, [d], eps=t["qk_norm_eps"]) * w[p + "self_attn.k_norm.weight"] + w[p + "self_attn.k_norm.bias"]
        q, k, v = (z.transpose(0, 1) for z in (q, k, v))
        q, k = rotate_half_rope(q, t["rope_theta"]), rotate_half_rope(k, t["rope_theta"])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(0, 1).reshape(n_tok, heads * d)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gated = F.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)
        x = x + gated @ w[p + "mlp.down_proj.weight"].T
    return rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def test_logits_are_neither_flat_nor_one_hot(bundle):
    t, layout = bundle["transformer"], bundle["layout"]
    w = load_file(str(DEFAULT / "model.safetensors"))
    prompt = "Generate an image of 128x128 according to the following prompt:\na red cube"
    first = bundle["tokenizer"]["first_id"]
    size_token = layout["size_token_base"] + 128 // layout["size_token_unit_px"]
    ids = ([layout["bos_id"]] + [first + b for b in prompt.encode()] +
           [layout["end_of_turn_id"], layout["begin_image_id"], size_token, size_token])
    torch.manual_seed(0)
    image_first = layout["image_token_first"]
    ids += (image_first + torch.randint(layout["codebook_size"], (40,))).tolist()
    with torch.no_grad():
        logits = chameleon_logits(w, t, torch.tensor(ids))
    std = logits.std(-1)
    assert 1.0 < std.mean().item() < 3.0, std
    image = logits[:, image_first:image_first + layout["codebook_size"]]
    entropy = -(image.softmax(-1) * image.log_softmax(-1)).sum(-1)
    max_entropy = math.log(layout["codebook_size"])
    # Sampling has real choices, but the distribution is far from uniform.
    assert (entropy > 1.0).all() and (entropy < max_entropy - 0.3).all(), entropy
    # The context matters: different positions predict different things.
    assert (image[-1] - image[-2]).abs().max() > 1.0
