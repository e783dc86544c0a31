"""The trained default model in models/default (scripts/build_default_model.sh writes it).

Checks that the bundle is whole and small, that every tensor has the shape bundle.json
implies (transformer in HF Chameleon names, VQ decoder loadable strictly into an independent
PyTorch decoder), that the layout's ids are the tokenizer's named tokens, that the model
is trained (the prompt steers the image distribution, the VQ decodes codes to the palette's
colours), and, where the sjd program is built, that sjd's logits equal a plain PyTorch
Chameleon forward of the same weights.
"""
import json
import math
import os
import pathlib
import subprocess

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file
from tokenizers import Tokenizer

from test_vq_decoder import VQGAN

ROOT = pathlib.Path(__file__).resolve().parents[2]
# SJD_DEFAULT_MODEL checks a freshly built bundle before it replaces models/default.
DEFAULT = pathlib.Path(os.environ.get("SJD_DEFAULT_MODEL", ROOT / "models" / "default"))


@pytest.fixture(scope="module")
def bundle():
    return json.loads((DEFAULT / "bundle.json").read_text())


@pytest.fixture(scope="module")
def weights(bundle):
    index = json.loads((DEFAULT / bundle["transformer"]["weights"][0]).read_text())
    files = sorted(set(index["weight_map"].values()))
    tensors = {}
    for name in files:
        tensors.update(load_file(str(DEFAULT / name)))
    return {k: v.float() for k, v in tensors.items()}  # stored in bf16 like Lumina's release; sjd computes in float32


@pytest.fixture(scope="module")
def tokenizer(bundle):
    return Tokenizer.from_file(str(DEFAULT / bundle["tokenizer"]["file"]))


def bundle_files(bundle):
    index = json.loads((DEFAULT / bundle["transformer"]["weights"][0]).read_text())
    return (["bundle.json", bundle["transformer"]["weights"][0], bundle["tokenizer"]["file"]] +
            sorted(set(index["weight_map"].values())) + bundle["vq"]["weights"])


def test_bundle_is_the_trained_lumina_model_and_small(bundle):
    assert bundle["family"] == "lumina-mgpt" and bundle["layout"]["kind"] == "lumina-mgpt"
    assert bundle["tokenizer"] == {"kind": "bpe", "file": "tokenizer.json"}
    assert bundle["transformer"]["qk_norm"] and bundle["transformer"]["key_style"] == "hf"
    vq, layout = bundle["vq"], bundle["layout"]
    # vq "resolution" is what the VQGAN trained at (its yaml's, as in the releases); the bundle draws its layout's
    assert layout["grid_height"] * vq["downsample"] == layout["resolutions"][0] >= vq["resolution"]
    assert layout["grid_height"] * layout["grid_width"] >= 256  # room for speculative decoding
    total = sum((DEFAULT / name).stat().st_size for name in set(bundle_files(bundle)))
    everything = sum(p.stat().st_size for p in DEFAULT.iterdir())
    assert total <= everything < 20e6


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


def test_transformer_tensors_match_bundle_json(bundle, weights):
    t = bundle["transformer"]
    assert 1e6 < sum(w.numel() for w in weights.values()) < 10e6  # "a few million parameters"
    assert {k: list(v.shape) for k, v in weights.items()} == expected_transformer_shapes(t)


def test_vq_tensors_load_strictly_into_the_reference_decoder(bundle):
    vq = bundle["vq"]
    with safe_open(str(DEFAULT / vq["weights"][0]), framework="pt") as f:
        found = {k: f.get_tensor(k) for k in f.keys()}
    reference = VQGAN(vq)
    reference.load_state_dict(found, strict=True)
    assert list(found["quantize.embedding.weight"].shape) == [vq["codebook_size"], vq["embed_dim"]]


def test_layout_ids_are_the_tokenizers_named_tokens(bundle, tokenizer):
    layout = bundle["layout"]
    ids = {name: tokenizer.token_to_id(name) for name in
           ("<s>", "<racm3:break>", "<eoss>", "<reserved08799>", "<reserved08706>", "<reserved08800>", "IMGIMGAZ")}
    assert ids == {"<s>": layout["bos_id"], "<racm3:break>": layout["begin_image_id"],
                   "<eoss>": layout["end_image_id"], "<reserved08799>": layout["newline_id"],
                   "<reserved08706>": layout["end_of_turn_id"], "<reserved08800>": layout["size_token_base"],
                   "IMGIMGAZ": layout["image_token_first"]}
    last = tokenizer.token_to_id("IMGIMG" + "".join("ABCDEFGHIJ"[int(d)] for d in str(layout["codebook_size"] - 1)) + "Z")
    assert last == layout["image_token_first"] + layout["codebook_size"] - 1
    assert tokenizer.get_vocab_size() <= bundle["transformer"]["vocab_size"]


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half_rope(x, theta):
    d, t = x.shape[-1], x.shape[-2]
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * freqs[None, :]
    cos, sin = torch.cat([angles.cos()] * 2, -1).float(), torch.cat([angles.sin()] * 2, -1).float()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def chameleon_logits(w, t, ids):
    """A plain Chameleon forward (qk-norm before RoPE, positions 0..T-1), [T] ids -> [T, V] logits."""
    heads, d, eps = t["num_heads"], t["head_dim"], t["norm_eps"]
    x = w["model.embed_tokens.weight"][ids]
    n_tok = len(ids)
    for n in range(t["num_layers"]):
        p = f"model.layers.{n}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q, k, v = ((a @ w[p + f"self_attn.{m}_proj.weight"].T).view(n_tok, heads, d) for m in "qkv")
        q = F.layer_norm(q, [d], eps=t["qk_norm_eps"]) * w[p + "self_attn.q_norm.weight"] + w[p + "self_attn.q_norm.bias"]
        k = F.layer_norm(k, [d], eps=t["qk_norm_eps"]) * w[p + "self_attn.k_norm.weight"] + w[p + "self_attn.k_norm.bias"]
        q, k, v = (z.transpose(0, 1) for z in (q, k, v))
        q, k = rotate_half_rope(q, t["rope_theta"]), rotate_half_rope(k, t["rope_theta"])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(0, 1).reshape(n_tok, heads * d)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + (F.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[
            p + "mlp.down_proj.weight"].T
    return rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def prompt_ids(bundle, tokenizer, caption):
    layout = bundle["layout"]
    side = str(bundle["layout"]["resolutions"][0])
    text = layout["prompt_template"].replace("{width}", side).replace("{height}", side).replace("{prompt}", caption)
    return [layout["bos_id"]] + tokenizer.encode(text, add_special_tokens=False).ids + [layout["end_of_turn_id"]]


def first_code_distribution(bundle, weights, ids):
    """p(first image code | ids + begin-image + size tokens), over the codebook."""
    layout = bundle["layout"]
    size = layout["size_token_base"] + bundle["layout"]["resolutions"][0] // layout["size_token_unit_px"]
    ids = ids + [layout["begin_image_id"], size, size]
    with torch.no_grad():
        logits = chameleon_logits(weights, bundle["transformer"], torch.tensor(ids))[-1]
    first = layout["image_token_first"]
    return logits[first:first + layout["codebook_size"]].softmax(-1)


def test_the_prompt_steers_the_image(bundle, weights, tokenizer):
    uncond = first_code_distribution(bundle, weights, [])
    red = first_code_distribution(bundle, weights, prompt_ids(bundle, tokenizer, "a small blue ring on the right, "
                                                                                  "on a red background"))
    green = first_code_distribution(bundle, weights, prompt_ids(bundle, tokenizer, "a small blue ring on the right, "
                                                                                    "on a green background"))
    # The top-left code is background: the background colour named in the prompt decides it.
    assert 0.5 * (red - green).abs().sum() > 0.5
    assert 0.5 * (red - uncond).abs().sum() > 0.3
    entropy = -(red * red.clamp_min(1e-30).log()).sum()
    assert entropy < math.log(bundle["layout"]["codebook_size"]) - 2.0  # far from uniform: a trained model
    # Decoding the conditional model's favourite first code as a flat image gives a red picture.
    vq = VQGAN(bundle["vq"])
    with safe_open(str(DEFAULT / bundle["vq"]["weights"][0]), framework="pt") as f:
        vq.load_state_dict({k: f.get_tensor(k) for k in f.keys()})
    grid = bundle["layout"]["grid_height"]
    image = vq.decode_float(torch.full((grid, grid), int(red.argmax()), dtype=torch.long))
    rgb = ((image.clamp(-1, 1) + 1) * 127.5).mean((1, 2))
    assert rgb[0] > 150 and rgb[1] < 110 and rgb[2] < 110, rgb


def sjd_program():
    build = pathlib.Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build"))
    return build / "sjd"


@pytest.mark.skipif(not sjd_program().exists(), reason="sjd is not built (set SJD_BUILD_DIR)")
def test_sjd_logits_equal_a_pytorch_chameleon_forward(bundle, weights, tokenizer, tmp_path):
    caption = "a large orange square on the left, on a blue and white striped background"
    layout = bundle["layout"]
    size = layout["size_token_base"] + bundle["layout"]["resolutions"][0] // layout["size_token_unit_px"]
    window = [layout["begin_image_id"], size, size, layout["image_token_first"] + 7, layout["image_token_first"] + 300]
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"rows": [{"text": caption}, {"uncond": True, "prompt": caption}], "window": window}))
    out = tmp_path / "logits.safetensors"
    subprocess.run([str(sjd_program()), "inspect", "--model", str(DEFAULT), "--logits", str(request), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    found = load_file(str(out))["logits"]
    ids = prompt_ids(bundle, tokenizer, caption)
    with torch.no_grad():
        cond = chameleon_logits(weights, bundle["transformer"], torch.tensor(ids + window))[len(ids) - 1:]
        # The unconditional row starts at begin-image with position 0: its logits for the window's
        # tokens come from the window alone (the first slot is the masked placeholder root).
        uncond = chameleon_logits(weights, bundle["transformer"], torch.tensor(window))
    assert found.shape[0] == 2 and found.shape[1] == len(window) + 1
    torch.testing.assert_close(found[0], cond, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(found[1, 1:], uncond, rtol=1e-3, atol=1e-3)
