"""Parity of sjd with the reference implementations for Lumina-mGPT (fp32, CPU).

Transformer: transformers' ChameleonForConditionalGeneration (tiny dims, random weights,
transformers' own [heads, head_dim] q/k-norm layout with a different row per head) against
`sjd inspect --logits` on the same ids: the last prompt token after the prefill plus one
window of draft tokens (begin-image, size tokens, image codes, a row end).
VQ: `sjd inspect --decode` against the taming-style reference decoder of test_vq_decoder.py
on random codes (transformers' ChameleonVQVAE has no decoder, so it cannot be the reference).
Tolerance: max |ours - reference| <= 1e-4 * max(1, max |reference|).
"""
import json

import pytest
import torch
from safetensors.torch import load_file

from test_lumina_export import (CODEBOOK, TEMPLATE, export_with_vqgan, run_sjd, write_release)

PROMPT = "a red fox in the snow, oil painting"
WINDOW = [8197, 8828, 8828, 4 + 17, 4 + 8000, 4 + 123, 8803]


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    directory = tmp_path_factory.mktemp("lumina_parity")
    model, vq_model = write_release(directory / "release", seed=3, dtype=torch.float32, lumina_style=False)
    export_with_vqgan(directory / "release", directory / "bundle")
    return directory, model, vq_model


def our_logits(directory, rows, window):
    request = directory / "logits.json"
    request.write_text(json.dumps({"rows": rows, "window": window}))
    out = directory / "logits.safetensors"
    result = run_sjd("inspect", "--model", directory / "bundle", "--logits", request, "--out", out)
    assert result.returncode == 0, result.stderr
    return load_file(str(out))["logits"]


def reference_logits(model, ids):
    """All-vocabulary logits of transformers' model (its forward masks the image columns; this does not)."""
    with torch.no_grad():
        hidden = model.model(input_ids=torch.tensor([ids])).last_hidden_state
        return model.lm_head(hidden)[0]


def prompt_ids(directory):
    result = run_sjd("tokenize", "--model", directory / "bundle", "--template", PROMPT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def relative_error(ours, reference):
    return ((ours - reference).abs().max() / max(1.0, reference.abs().max().item())).item()


def test_q_norm_rows_differ_per_head(parity):
    _, model, _ = parity
    weight = model.model.layers[0].self_attn.q_norm.weight
    assert weight.shape[0] == 4 and not torch.allclose(weight[0], weight[1])


def test_prefill_and_window_logits_match_transformers(parity):
    directory, model, _ = parity
    ids = prompt_ids(directory)
    ours = our_logits(directory, [{"text": PROMPT}], WINDOW)[0]  # [1 + window, V], prompt built by the family
    reference = reference_logits(model, ids + WINDOW)[-(1 + len(WINDOW)):]
    error = relative_error(ours, reference)
    print(f"logits max abs error relative to logit scale: {error:.3e}")
    assert error <= 1e-4
    assert reference.std() > 0.5  # the weights are random enough for the comparison to mean something
    # transformers' own forward gives the same numbers outside the image columns it masks.
    with torch.no_grad():
        masked = model(input_ids=torch.tensor([ids + WINDOW])).logits[0, -(1 + len(WINDOW)):]
    text_columns = torch.ones(masked.shape[-1], dtype=torch.bool)
    text_columns[4:4 + CODEBOOK] = False
    assert relative_error(ours[:, text_columns], masked[:, text_columns]) <= 1e-4


def test_prompt_template_is_the_references(parity):
    directory, _, _ = parity
    ids = prompt_ids(directory)
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(directory / "bundle" / "tokenizer.json"))
    text = TEMPLATE.format(w=768, h=768, p=PROMPT) + "<reserved08706>"
    assert ids == [0] + reference.encode(text, add_special_tokens=False).ids


def test_a_wrong_position_would_be_seen(parity):
    # The comparison can fail: shifting the reference by one position changes the logits.
    directory, model, _ = parity
    ids = prompt_ids(directory)
    ours = our_logits(directory, [{"tokens": ids}], WINDOW)[0]
    shifted = reference_logits(model, [0] + ids + WINDOW)[-(1 + len(WINDOW)):]
    assert relative_error(ours, shifted) > 1e-2


def test_unconditional_window_matches_the_reference_branch(parity):
    # Lumina's CFG branch is the generated tokens alone, from begin-image at position 0.
    directory, model, _ = parity
    ours = our_logits(directory, [{"text": PROMPT}, {"uncond": True, "prompt": PROMPT}], WINDOW)[1, 1:]
    reference = reference_logits(model, WINDOW)
    assert relative_error(ours, reference) <= 1e-4


def test_vq_decode_matches_the_reference(parity, tmp_path):
    directory, _, vq_model = parity
    codes = torch.randint(CODEBOOK, (3, 5), generator=torch.Generator().manual_seed(9))
    request = tmp_path / "codes.json"
    request.write_text(json.dumps({"codes": codes.tolist()}))
    result = run_sjd("inspect", "--model", directory / "bundle", "--decode", request, "--out", tmp_path / "img.st")
    assert result.returncode == 0, result.stderr
    ours = load_file(str(tmp_path / "img.st"))["image"]
    reference = vq_model.decode_float(codes)
    assert ours.shape == (3, 48, 80)
    error = relative_error(ours, reference)
    print(f"VQ decode max abs error relative to pixel scale: {error:.3e}")
    assert error <= 1e-4
