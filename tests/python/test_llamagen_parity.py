"""LlamaGen T2I numerics, fp32 on the CPU, on the tiny release of test_llamagen_export.py.

LlamaGen has no transformers class, so its GPT and VQ-16 decoder are written below directly
from the paper's description, reading the release's state dicts by name:
  * GPT: 120 caption slots (T5 output, left-padded, pad rows zeroed, projected by
    fc2(gelu_tanh(fc1 x))) then image tokens; causal attention in which caption keys are
    visible only where the caption mask is 1, every slot seeing itself; 2D RoPE in complex
    form: head dim D as D/2 complex pairs, the first D/4 turned by the token's grid row, the
    last D/4 by its column, frequency base^(-k/(D/4)); caption slots multiplied by 0.
    The unconditional row is the learned uncond_embedding with the same mask.
  * VQ-16: codebook rows L2-normalised, 1x1 post_quant_conv, conv_in, mid (res, attn, res),
    then the conv_blocks in order (res [+ attn], upsample by nearest x2 + conv), GN, swish, conv_out.
The T5 encoder is transformers' own T5EncoderModel.

Compared: `sjd inspect --logits` (rows {"text": ...} and {"uncond": true}, then a window of
20 image tokens: prefill logits and one window step, crossing a grid row) and
`sjd inspect --decode`, both at max |difference| < 1e-4; the C++ T5 encoder against
T5EncoderModel through the hidden Catch2 case "[t5-fixture]" (tests_model).
"""
import json
import os
import subprocess

import pytest
import sentencepiece
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from test_llamagen_export import BUILD_DIR, CAPTION, HEADS, export, run_sjd, write_release

TOLERANCE = 1e-4
GRID = 16


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    release = write_release(tmp_path_factory.mktemp("llamagen_parity_release"))
    bundle = tmp_path_factory.mktemp("llamagen_parity_bundle") / "b256"
    result = export(release, bundle)
    assert result.returncode == 0, result.stderr
    return release, bundle


# --------------------------------------------------------------------------- caption (transformers' T5)


def caption_rows(release, prompt):
    """LlamaGen's T5 step for one prompt: (caption [120, d] left-padded with zero pads, mask [120])."""
    from transformers import T5EncoderModel

    t5_dir = release / "flan-t5-xl"
    processor = sentencepiece.SentencePieceProcessor(model_file=str(t5_dir / "spiece.model"))
    cleaned = " ".join(prompt.lower().split())  # what LlamaGen's cleaner does to these prompts
    ids = processor.encode(cleaned)[:CAPTION - 1] + [1]  # max_length 120, truncation, </s>
    valid = len(ids)
    input_ids = torch.tensor([ids + [0] * (CAPTION - valid)])
    mask = torch.tensor([[1] * valid + [0] * (CAPTION - valid)])
    model = T5EncoderModel.from_pretrained(str(t5_dir)).eval()
    with torch.no_grad():
        embs = model(input_ids=input_ids, attention_mask=mask).last_hidden_state[0]
    left = torch.cat([embs[valid:], embs[:valid]])  # valid rows moved to the end
    left_mask = torch.flip(mask[0], dims=[0])
    return left * left_mask[:, None], left_mask


# --------------------------------------------------------------------------- GPT from the description


def rms(x, weight, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_2d(x, cells):
    """x [T, heads, D]; cells[t] = grid cell of token t, or None for a caption slot."""
    d = x.shape[-1]
    quarter = d // 4
    freq = 10000.0 ** (-torch.arange(quarter, dtype=torch.float64) / quarter)
    turns = []
    for cell in cells:
        if cell is None:
            turns.append(torch.zeros(d // 2, dtype=torch.complex128))
        else:
            angle = torch.cat([(cell // GRID) * freq, (cell % GRID) * freq])
            turns.append(torch.polar(torch.ones_like(angle), angle))
    turn = torch.stack(turns).to(torch.complex64)[:, None, :]
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape)


def gpt_logits(sd, caption, mask, window):
    """Logits [1 + len(window), V] at the last caption slot and at each window token."""
    hidden = sd["tok_embeddings.weight"].shape[1]
    head_dim = hidden // HEADS
    projected = F.linear(F.gelu(F.linear(caption, sd["cls_embedding.cap_proj.fc1.weight"]), approximate="tanh"),
                         sd["cls_embedding.cap_proj.fc2.weight"])
    x = torch.cat([projected, sd["tok_embeddings.weight"][torch.tensor(window, dtype=torch.long)]])
    n = x.shape[0]
    cells = [None] * CAPTION + list(range(len(window)))
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    allowed[:, :CAPTION] &= mask.bool()[None, :]
    allowed |= torch.eye(n, dtype=torch.bool)
    layer = 0
    while f"layers.{layer}.attention.wqkv.weight" in sd:
        p = f"layers.{layer}."
        h = rms(x, sd[p + "attention_norm.weight"])
        q, k, v = F.linear(h, sd[p + "attention.wqkv.weight"]).split(hidden, dim=-1)
        q = rotate_2d(q.view(n, HEADS, head_dim), cells)
        k = rotate_2d(k.view(n, HEADS, head_dim), cells)
        v = v.view(n, HEADS, head_dim)
        out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                             attn_mask=allowed)
        x = x + F.linear(out.transpose(0, 1).reshape(n, hidden), sd[p + "attention.wo.weight"])
        h = rms(x, sd[p + "ffn_norm.weight"])
        gate, up = F.linear(h, sd[p + "feed_forward.w1.weight"]), F.linear(h, sd[p + "feed_forward.w3.weight"])
        x = x + F.linear(F.silu(gate) * up, sd[p + "feed_forward.w2.weight"])
        layer += 1
    return F.linear(rms(x, sd["norm.weight"]), sd["output.weight"])[CAPTION - 1:]


# --------------------------------------------------------------------------- VQ-16 from the description


def conv(sd, name, x):
    weight = sd[name + ".weight"]
    return F.conv2d(x, weight, sd[name + ".bias"], padding=weight.shape[-1] // 2)


def group_norm(sd, name, x):
    return F.group_norm(x, 32, sd[name + ".weight"], sd[name + ".bias"], eps=1e-6)


def res_block(sd, name, x):
    h = conv(sd, name + ".conv1", F.silu(group_norm(sd, name + ".norm1", x)))
    h = conv(sd, name + ".conv2", F.silu(group_norm(sd, name + ".norm2", h)))
    skip = conv(sd, name + ".nin_shortcut", x) if name + ".nin_shortcut.weight" in sd else x
    return skip + h


def attn_block(sd, name, x):
    _, c, height, width = x.shape
    h = group_norm(sd, name + ".norm", x)
    q, k, v = (conv(sd, f"{name}.{part}", h).reshape(c, height * width) for part in ("q", "k", "v"))
    weights = torch.softmax(torch.einsum("ci,cj->ij", q, k) / c ** 0.5, dim=-1)  # query i, key j
    out = torch.einsum("ij,cj->ci", weights, v).reshape(1, c, height, width)
    return x + conv(sd, name + ".proj_out", out)


def vq_decode(sd, codes):
    codebook = F.normalize(sd["quantize.embedding.weight"], p=2, dim=-1)
    h = conv(sd, "post_quant_conv", codebook[codes].permute(2, 0, 1)[None])
    h = conv(sd, "decoder.conv_in", h)
    h = attn_block(sd, "decoder.mid.1", res_block(sd, "decoder.mid.0", h))
    h = res_block(sd, "decoder.mid.2", h)
    i = 0
    while f"decoder.conv_blocks.{i}.res.0.conv1.weight" in sd:
        j = 0
        while f"decoder.conv_blocks.{i}.res.{j}.conv1.weight" in sd:
            h = res_block(sd, f"decoder.conv_blocks.{i}.res.{j}", h)
            if f"decoder.conv_blocks.{i}.attn.{j}.q.weight" in sd:
                h = attn_block(sd, f"decoder.conv_blocks.{i}.attn.{j}", h)
            j += 1
        if f"decoder.conv_blocks.{i}.upsample.conv.weight" in sd:
            h = conv(sd, f"decoder.conv_blocks.{i}.upsample.conv", F.interpolate(h, scale_factor=2.0, mode="nearest"))
        i += 1
    return conv(sd, "decoder.conv_out", F.silu(group_norm(sd, "decoder.norm_out", h)))[0]


# --------------------------------------------------------------------------- tests

PROMPTS = ["A photo of an astronaut riding a horse in the forest", "cat", " ".join(["red dog"] * 70)]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["sentence", "one-word", "truncated"])
def test_logits_match_the_reference_gpt(setup, tmp_path, prompt):
    release, bundle = setup
    window = [(7 * i + 3) % 64 for i in range(20)]  # 20 image tokens: cells 0..19 cross into grid row 1
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"rows": [{"text": prompt}, {"uncond": True, "prompt": prompt}], "window": window}))
    run_sjd("inspect", "--model", bundle, "--logits", request, "--out", tmp_path / "logits.safetensors")
    got = load_file(str(tmp_path / "logits.safetensors"))["logits"]
    assert got.shape == (2, 1 + len(window), 64)

    sd = torch.load(release / "t2i_XL_stage1_256.pt", weights_only=False)["model"]
    caption, mask = caption_rows(release, prompt)
    with torch.no_grad():
        cond = gpt_logits(sd, caption, mask, window)
        uncond = gpt_logits(sd, sd["cls_embedding.uncond_embedding"], mask, window)
    errors = ((got[0] - cond).abs().max().item(), (got[1] - uncond).abs().max().item())
    print(f"logits, {int(mask.sum())} caption tokens: max |sjd - reference| cond {errors[0]:.2e}, "
          f"uncond {errors[1]:.2e} (logit scale {cond.abs().max().item():.2f})")
    assert max(errors) < TOLERANCE
    # The comparison is sensitive: the two rows differ, and the unconditional row with every
    # caption slot visible (instead of the prompt's mask) would give other logits.
    assert (cond - uncond).abs().max().item() > 1e-2
    if int(mask.sum()) < CAPTION:
        with torch.no_grad():
            all_visible = gpt_logits(sd, sd["cls_embedding.uncond_embedding"], torch.ones_like(mask), window)
        assert (all_visible - got[1]).abs().max().item() > 1e-3


@pytest.mark.parametrize("height,width", [(16, 16), (3, 5)])
def test_decoded_pixels_match_the_reference_vq16(setup, tmp_path, height, width):
    release, bundle = setup
    gen = torch.Generator().manual_seed(height * 100 + width)
    codes = torch.randint(0, 64, (height, width), generator=gen)
    request = tmp_path / "codes.json"
    request.write_text(json.dumps({"codes": codes.tolist()}))
    run_sjd("inspect", "--model", bundle, "--decode", request, "--out", tmp_path / "image.safetensors")
    got = load_file(str(tmp_path / "image.safetensors"))["image"]
    sd = torch.load(release / "vq_ds16_t2i.pt", weights_only=False)["model"]
    with torch.no_grad():
        want = vq_decode(sd, codes)
    assert got.shape == want.shape == (3, 16 * height, 16 * width)
    error = (got - want).abs().max().item()
    print(f"VQ-16 decode {height}x{width}: max |sjd - reference| {error:.2e} "
          f"(pixel scale {want.abs().max().item():.2f})")
    assert error < TOLERANCE


def test_t5_encoder_matches_transformers(setup, tmp_path):
    from transformers import T5EncoderModel

    release, bundle = setup
    t5_dir = release / "flan-t5-xl"
    model = T5EncoderModel.from_pretrained(str(t5_dir)).eval()
    section = json.loads((bundle / "bundle.json").read_text())["text_encoder"]
    (tmp_path / "text_encoder.json").write_text(json.dumps(section))
    save_file(load_file(str(bundle / "t5_encoder.safetensors")), str(tmp_path / "t5_encoder.safetensors"))
    gen = torch.Generator().manual_seed(5)
    cases, expected = [], {}
    for i, (valid, total) in enumerate([(7, CAPTION), (CAPTION, CAPTION), (1, 9), (40, 40)]):
        ids = torch.randint(3, 56, (total,), generator=gen)
        ids[valid - 1] = 1
        ids[valid:] = 0
        mask = torch.tensor([1] * valid + [0] * (total - valid))
        with torch.no_grad():
            out = model(input_ids=ids[None], attention_mask=mask[None]).last_hidden_state[0]
        cases.append({"ids": ids.tolist(), "mask": mask.tolist()})
        expected[f"case{i}"] = out.contiguous()
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    save_file(expected, str(tmp_path / "expected.safetensors"))
    binary = BUILD_DIR / "tests" / "tests_model"
    if not binary.is_file():
        pytest.fail(f"{binary} not built")
    result = subprocess.run([str(binary), "[t5-fixture]"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "SJD_T5_FIXTURE_DIR": str(tmp_path)})
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "t5 case 3" in result.stdout
