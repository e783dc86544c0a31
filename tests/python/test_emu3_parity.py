"""Parity of sjd's Emu3 with transformers' Emu3 classes on the CPU in fp32.

On the tiny release of test_emu3_export.py (exported with export_bundle.py emu3):
  - logits: `sjd inspect --logits` for the family's conditional row (a prompt through the template)
    its unconditional row (the bundle's negative prompt) and the row of a user's negative prompt
    (--negative-prompt), plus one window of 3 visual tokens, against
    transformers' Emu3ForCausalLM run on the reference-tokenised rows (+ the window);
  - pixels: `sjd inspect --decode` of random codes against Emu3VQVAE.decode, with a VisionTokenizer
    that has every block kind (channel changes, 3 resnet blocks per level, attention at level 3),
    both from the release layout and from a transformers save_pretrained folder.
Tolerances are fp32 round-off: 1e-4 absolute on logits of about unit scale and on pixels in [-1, 1].
"""
import json
import unicodedata

import pytest
import torch
from safetensors.torch import load_file

from test_emu3_export import (NEGATIVE, POSITIVE, TINY_VQ_FULL, export, reference_encoding, run_sjd, tiny_vq,
                              vocabulary_ranks, write_emu3_gen, write_vision_tokenizer_release)

LOGIT_TOLERANCE = 1e-4
PIXEL_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("emu3_parity")
    model = write_emu3_gen(root / "Emu3-Gen", seed=11)
    vq = tiny_vq(TINY_VQ_FULL, seed=12)
    write_vision_tokenizer_release(root / "Emu3-VisionTokenizer", vq)
    vq.save_pretrained(str(root / "Emu3VQVAE"))
    bundles = {}
    for flavour, vq_dir in (("release", root / "Emu3-VisionTokenizer"), ("transformers", root / "Emu3VQVAE")):
        result = export(root / "Emu3-Gen", vq_dir, root / f"bundle-{flavour}")
        assert result.returncode == 0, result.stderr
        bundles[flavour] = root / f"bundle-{flavour}"
    return root, model, vq, bundles


def reference_row(text):
    encoding = reference_encoding(vocabulary_ranks())
    full = "<|extra_203|>" + text + "<|image start|>90*90<|image token|>"
    return encoding.encode(unicodedata.normalize("NFC", full), allowed_special="all")


def test_prefill_and_window_logits_match_transformers(release, tmp_path):
    root, model, _, bundles = release
    prompt = "a red fox in the snow, oil painting"
    window = [151854 + 5, 151854 + 32000, 151854 + 77]
    request = tmp_path / "request.json"
    # The third row is a user's negative prompt (--negative-prompt): Emu3's processor call on that text instead.
    users_negative = "a blurry photo of a dog"
    request.write_text(json.dumps({"rows": [{"text": prompt}, {"uncond": True, "prompt": prompt},
                                            {"negative": users_negative}], "window": window}))
    out = tmp_path / "logits.safetensors"
    result = run_sjd("inspect", "--model", bundles["release"], "--logits", request, "--out", out)
    assert result.returncode == 0, result.stderr
    logits = load_file(str(out))["logits"]
    assert logits.shape == (3, 1 + len(window), 184622)

    for row, text in enumerate([prompt + POSITIVE, NEGATIVE, users_negative]):
        ids = reference_row(text)
        with torch.no_grad():
            expected = model(torch.tensor([ids + window])).logits[0, len(ids) - 1:]
        error = (logits[row] - expected).abs().max().item()
        print(f"row {row} ({len(ids)} prompt tokens + {len(window)} window): max |logit error| {error:.2e}, "
              f"logit scale {expected.abs().max().item():.2f}")
        assert error < LOGIT_TOLERANCE, row


@pytest.mark.parametrize("flavour", ["release", "transformers"])
def test_movq_decode_matches_transformers(release, tmp_path, flavour):
    _, _, vq, bundles = release
    torch.manual_seed(13)
    codes = torch.randint(0, 32768, (6, 5))
    request = tmp_path / "codes.json"
    request.write_text(json.dumps({"codes": codes.tolist()}))
    out = tmp_path / "image.safetensors"
    result = run_sjd("inspect", "--model", bundles[flavour], "--decode", request, "--out", out)
    assert result.returncode == 0, result.stderr
    image = load_file(str(out))["image"]
    with torch.no_grad():
        expected = vq.decode(codes[None])[0]
    assert image.shape == expected.shape == (3, 48, 40)
    error = (image - expected).abs().max().item()
    print(f"{flavour}: max |pixel error| {error:.2e}, pixel scale {expected.abs().max().item():.2f}")
    assert error < PIXEL_TOLERANCE
