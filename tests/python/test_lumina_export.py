"""export_bundle.py lumina-mgpt on a tiny checkpoint in the exact Lumina-mGPT release layout.

The release is rebuilt here at tiny widths with the real ids and file formats:
  - transformers' own ChameleonForConditionalGeneration, saved with save_pretrained in
    bf16 shards (model-0000x-of-0000y.safetensors + model.safetensors.index.json), then
    given Lumina's conventions: q/k-norm weights [1, head_dim] (shared by all heads),
    config.json with top-level rope_theta/rope_scaling and the whole vocabulary_map;
  - a tokenizer.json trained with `tokenizers` using Chameleon's pre-tokenizer sequence,
    whose vocabulary holds the real special-token names at the real ids: <s> 0, image
    tokens IMGIMG<letters>Z 4..8195, <eoss> 8196, <racm3:break> 8197, <reservedNNNNN>
    at NNNNN + 4 (so <reserved08706> 8710, <reserved08799> 8803, <reserved08800 + n>
    8804 + n), text tokens above;
  - Meta-style vqgan.ckpt (a pickle, tensors under "state_dict", encoder and loss keys
    included) + vqgan.yaml, with the real 5-level (16x) decoder at 32 channels, so the
    real 48x48 grid decodes to a real 768x768 image.
`sjd generate` must then produce the real geometry (2357 generated tokens, 768 px), and
its image must be the reference decoder's image of the generated codes.
The binary is $SJD_BUILD_DIR/sjd (CTest sets SJD_BUILD_DIR).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from test_tokenizer_parity import chameleon_pre_tokenizer
from test_vq_decoder import VQGAN, to_bytes

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ROOT / "scripts" / "export_bundle.py"

CODEBOOK = 8192
FIRST_IMAGE_ID = 4
SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<eoss>": 8196, "<racm3:break>": 8197}
RESERVED = range(8194, 8833)  # <reservedNNNNN> at id NNNNN + 4, up to the 1024 px size token
FIRST_TEXT_ID = 8837
VOCAB_SIZE = 9216
TEMPLATE = "Generate an image of {w}x{h} according to the following prompt:\n{p}"
VQ_YAML = {
    "embed_dim": 4, "n_embed": CODEBOOK,
    "ddconfig": {"double_z": False, "z_channels": 8, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 32,
                 "ch_mult": [1, 1, 1, 1, 1], "num_res_blocks": 1, "attn_resolutions": [], "dropout": 0.0},
}
TINY_TRANSFORMER = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=4)


def image_token_name(index):
    """Chameleon's image token for a codebook index: digits 0..9 spelled A..J."""
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(index)) + "Z"


def reserved(n):
    return f"<reserved{n:05d}>"


# --------------------------------------------------------------------------- the release


def structure_vocabulary(image_order=None):
    """Name -> id of everything below the text tokens. image_order[i] = codebook index of id 4 + i."""
    order = image_order if image_order is not None else range(CODEBOOK)
    vocab = dict(SPECIALS)
    vocab.update({image_token_name(index): FIRST_IMAGE_ID + i for i, index in enumerate(order)})
    vocab.update({reserved(n): n + 4 for n in RESERVED})
    return vocab


def write_tokenizer(directory, structure):
    """tokenizer.json in Chameleon's format; returns its full vocabulary (name -> id)."""
    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = chameleon_pre_tokenizer()
    trained.decoder = decoders.ByteLevel()
    corpus = [TEMPLATE.format(w=768, h=768, p="a red fox in the snow, oil painting"),
              "a photo of a cat sitting on a blue table under the bright sunny sky"] * 20
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - FIRST_TEXT_ID, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    trained.train_from_iterator(corpus, trainer)
    data = json.loads(trained.to_str())
    text_vocab = data["model"]["vocab"]
    assert FIRST_TEXT_ID + len(text_vocab) <= VOCAB_SIZE
    # The real file keeps the structure tokens in the BPE vocab too, text tokens above them.
    data["model"]["vocab"] = {**structure, **{t: FIRST_TEXT_ID + i for t, i in text_vocab.items()}}
    specials = [name for name in structure if name.startswith("<")]
    data["added_tokens"] = [{"id": structure[name], "content": name, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True} for name in specials]
    # A BOS template the reference never applies (it encodes with add_special_tokens=False).
    data["post_processor"] = {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}
    (directory / "tokenizer.json").write_text(json.dumps(data))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "tokenizer_class": "LlamaTokenizerFast"}))
    Tokenizer.from_file(str(directory / "tokenizer.json"))  # the reference library must load it
    return data["model"]["vocab"]


def randomize(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("model.vqmodel"):
                continue
            if name.endswith("norm.weight") or "layernorm" in name:
                p.normal_(1.0, 0.2)
            elif name.endswith("norm.bias"):
                p.normal_(0.0, 0.2)
            else:
                p.normal_(0.0, 0.15)


def chameleon_model(vocabulary_map, seed, **overrides):
    from transformers import ChameleonConfig, ChameleonForConditionalGeneration

    settings = dict(TINY_TRANSFORMER, vocab_size=VOCAB_SIZE, rms_norm_eps=1e-5, max_position_embeddings=4096,
                    vocabulary_map=vocabulary_map,
                    vq_config=dict(embed_dim=4, num_embeddings=CODEBOOK, latent_channels=8, resolution=256,
                                   base_channels=32, channel_multiplier=[1, 2], num_res_blocks=1))
    settings.update(overrides)
    config = ChameleonConfig(**settings)
    config._attn_implementation = "eager"
    model = ChameleonForConditionalGeneration(config).eval()
    randomize(model, seed)
    return model


def rewrite_shards(directory, edit):
    """Applies edit(name, tensor) -> tensor or None (drop) to every shard, keeping the index in step."""
    index_file = directory / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    for shard in sorted(set(index["weight_map"].values())):
        tensors = load_file(str(directory / shard))
        kept = {}
        for name, tensor in tensors.items():
            new = edit(name, tensor)
            if new is None:
                del index["weight_map"][name]
            else:
                kept[name] = new.contiguous()
        save_file(kept, str(directory / shard), metadata={"format": "pt"})
    index_file.write_text(json.dumps(index, indent=2))


def lumina_config(directory):
    """config.json as the release has it (written by an older transformers, Lumina's own class)."""
    config_file = directory / "config.json"
    config = json.loads(config_file.read_text())
    theta = config.pop("rope_parameters")["rope_theta"]
    config.update(rope_theta=theta, rope_scaling=None, architectures=["ChameleonXLLMXForConditionalGeneration"],
                  z_loss_weight=1e-5, mask_image_logits=False, model_parallel_size=1, torch_dtype="bfloat16")
    config_file.write_text(json.dumps(config, indent=2))


def reference_vqgan(seed):
    cfg = dict(codebook_size=CODEBOOK, embed_dim=VQ_YAML["embed_dim"], z_channels=VQ_YAML["ddconfig"]["z_channels"],
               ch=VQ_YAML["ddconfig"]["ch"], ch_mult=VQ_YAML["ddconfig"]["ch_mult"],
               num_res_blocks=VQ_YAML["ddconfig"]["num_res_blocks"], attn_resolutions=[],
               resolution=VQ_YAML["ddconfig"]["resolution"], out_channels=3)
    torch.manual_seed(seed)
    model = VQGAN(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embedding.weight"):
                p.normal_()
            elif ".norm" in name:
                p.normal_(1.0 if name.endswith(".weight") else 0.0, 0.2)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.1)
    return model


def write_vqgan(directory, model):
    """Meta's vqgan.ckpt layout: a Lightning-style pickle; encoder/loss tensors are there too."""
    state = dict(model.state_dict())
    state["encoder.conv_in.weight"] = torch.randn(32, 3, 3, 3)
    state["encoder.conv_in.bias"] = torch.randn(32)
    state["quant_conv.weight"] = torch.randn(VQ_YAML["embed_dim"], VQ_YAML["ddconfig"]["z_channels"], 1, 1)
    state["quant_conv.bias"] = torch.randn(VQ_YAML["embed_dim"])
    state["loss.discriminator.main.0.weight"] = torch.randn(8, 3, 4, 4)
    torch.save({"epoch": 3, "global_step": 1000, "pytorch-lightning_version": "1.9.0", "state_dict": state},
               directory / "vqgan.ckpt")
    import yaml

    params = dict(VQ_YAML, lossconfig={"target": "taming.modules.losses.vqperceptual.VQLPIPSWithDiscriminator",
                                       "params": {"disc_start": 0}})
    (directory / "vqgan.yaml").write_text(yaml.safe_dump(
        {"model": {"target": "taming.models.vqgan.VQModel", "params": params}}))


def write_release(directory, seed=0, image_order=None, dtype=torch.bfloat16, lumina_style=True):
    """A tiny Lumina-mGPT release in `directory`: HF folder in hf/, Meta's VQGAN files in vq/.
    lumina_style=False keeps transformers' own conventions instead (q/k-norm [heads, D] as in
    facebook/chameleon-7b, config.json with rope_parameters). Returns the reference models."""
    hf, vq = directory / "hf", directory / "vq"
    hf.mkdir(parents=True)
    vq.mkdir(parents=True)
    vocab = write_tokenizer(hf, structure_vocabulary(image_order))
    vocabulary_map = dict(vocab)
    vocabulary_map["<image>"] = vocabulary_map.pop(reserved(8707))  # as transformers' converter renames it
    model = chameleon_model(vocabulary_map, seed)
    if lumina_style:  # one [1, D] row shared by all heads, as Lumina's [model_parallel_size, D]
        with torch.no_grad():
            for layer in model.model.layers:
                for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
                    norm.weight.copy_(norm.weight[:1].expand_as(norm.weight))
                    norm.bias.copy_(norm.bias[:1].expand_as(norm.bias))
    model.to(dtype).save_pretrained(str(hf), max_shard_size="100KB")
    if lumina_style:
        rewrite_shards(hf, lambda name, t: t[:1] if name.endswith(("q_norm.weight", "q_norm.bias", "k_norm.weight",
                                                                    "k_norm.bias")) else t)
        lumina_config(hf)
    vq_model = reference_vqgan(seed + 1)
    write_vqgan(vq, vq_model)
    return model, vq_model


# --------------------------------------------------------------------------- running


def sjd_binary():
    build = os.environ.get("SJD_BUILD_DIR")
    if not build:
        pytest.skip("SJD_BUILD_DIR is not set (CTest sets it)")
    binary = Path(build) / "sjd"
    if not binary.exists():
        pytest.fail(f"{binary} not found: build the sjd target first")
    return binary


def export(release, out, *extra):
    cmd = [sys.executable, str(EXPORT), "lumina-mgpt", "--hf-dir", str(release / "hf"), "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def export_with_vqgan(release, out, *extra):
    result = export(release, out, "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((out / "bundle.json").read_text())


def run_sjd(*args, timeout=600):
    result = subprocess.run([str(sjd_binary()), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    return result


def read_png_rgb(path):
    """Width, height and the RGB bytes of an 8-bit RGB PNG (no filters beyond the standard five)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2), "expected 8-bit RGB"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * 3
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - 3] if x >= 3 else 0
            b, c = previous[x], (previous[x - 3] if x >= 3 else 0)
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.uint8).view(height, width, 3)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    directory = tmp_path_factory.mktemp("lumina_release")
    write_release(directory)
    return directory


@pytest.fixture(scope="module")
def bundle_dir(release, tmp_path_factory):
    out = tmp_path_factory.mktemp("lumina_bundle")
    export_with_vqgan(release, out)
    return out


# --------------------------------------------------------------------------- tests


def test_release_fixture_has_the_real_layout(release):
    index = json.loads((release / "hf" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and all(re.fullmatch(r"model-\d{5}-of-\d{5}\.safetensors", s) for s in shards)
    names = set(index["weight_map"])
    for name in ["lm_head.weight", "model.embed_tokens.weight", "model.norm.weight",
                 "model.layers.1.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.bias",
                 "model.layers.0.mlp.gate_proj.weight", "model.vqmodel.quantize.embedding.weight"]:
        assert name in names, name
    assert not any(n.startswith("model.vqmodel.decoder.") for n in names)  # transformers keeps no VQ decoder
    shard = index["weight_map"]["model.layers.0.self_attn.q_norm.weight"]
    with safe_open(str(release / "hf" / shard), framework="pt") as f:
        q_norm = f.get_tensor("model.layers.0.self_attn.q_norm.weight")
    assert list(q_norm.shape) == [1, 8] and q_norm.dtype == torch.bfloat16
    config = json.loads((release / "hf" / "config.json").read_text())
    vmap = config["vocabulary_map"]
    assert (vmap["<racm3:break>"], vmap["<eoss>"], vmap["<reserved08706>"], vmap["<reserved08799>"],
            vmap["<reserved08824>"], vmap[image_token_name(0)], vmap[image_token_name(8191)]) == \
        (8197, 8196, 8710, 8803, 8828, 4, 8195)
    checkpoint = torch.load(str(release / "vq" / "vqgan.ckpt"), weights_only=False)
    assert "encoder.conv_in.weight" in checkpoint["state_dict"] and "decoder.conv_out.weight" in checkpoint["state_dict"]


def test_bundle_has_the_release_ids(bundle_dir, release):
    bundle = json.loads((bundle_dir / "bundle.json").read_text())
    layout = bundle["layout"]
    assert {k: layout[k] for k in ("grid_height", "grid_width", "image_token_first", "codebook_size", "bos_id",
                                   "begin_image_id", "end_image_id", "newline_id", "end_of_turn_id",
                                   "size_token_base", "size_token_unit_px", "resolutions")} == {
        "grid_height": 48, "grid_width": 48, "image_token_first": 4, "codebook_size": 8192, "bos_id": 0,
        "begin_image_id": 8197, "end_image_id": 8196, "newline_id": 8803, "end_of_turn_id": 8710,
        "size_token_base": 8804, "size_token_unit_px": 32, "resolutions": [512, 768, 1024]}
    assert layout["prompt_template"] == TEMPLATE.format(w="{width}", h="{height}", p="{prompt}")
    assert layout["max_positions"] == 4096  # config.json's max_position_embeddings
    t = bundle["transformer"]
    assert (t["vocab_size"], t["hidden_size"], t["num_layers"], t["num_heads"], t["head_dim"],
            t["intermediate_size"], t["qk_norm"], t["rope"], t["rope_theta"]) == \
        (VOCAB_SIZE, 32, 2, 4, 8, 48, True, "1d", 10000.0)
    # The shards are used in place: the bundle names the release's index file.
    assert (bundle_dir / t["weights"][0]).resolve() == (release / "hf" / "model.safetensors.index.json").resolve()
    assert bundle["tokenizer"] == {"kind": "bpe", "file": "tokenizer.json"}
    assert bundle["vq"]["downsample"] == 16 and bundle["vq"]["ch_mult"] == [1, 1, 1, 1, 1]
    vq = load_file(str(bundle_dir / "vqgan.safetensors"))
    assert not any(k.startswith(("encoder.", "quant_conv.", "loss.")) for k in vq)
    assert "decoder.conv_out.weight" in vq and "post_quant_conv.weight" in vq


def test_prompt_ids_match_the_reference_tokenization(bundle_dir):
    prompt = "a red fox in the snow, oil painting"
    result = run_sjd("tokenize", "--model", bundle_dir, "--template", prompt)
    assert result.returncode == 0, result.stderr
    ours = json.loads(result.stdout)
    # Lumina's item processor: BOS + encode(question + "<reserved08706>", add_special_tokens=False).
    reference = Tokenizer.from_file(str(bundle_dir / "tokenizer.json"))
    text = TEMPLATE.format(w=768, h=768, p=prompt) + "<reserved08706>"
    expected = [0] + reference.encode(text, add_special_tokens=False).ids
    assert ours == expected
    assert expected[-1] == 8710 and expected.count(0) == 1


def test_generate_768_has_the_real_geometry(bundle_dir, release, tmp_path):
    png, tokens_file = tmp_path / "fox.png", tmp_path / "tokens.json"
    result = run_sjd("generate", "--model", bundle_dir, "--prompt", "a red fox in the snow", "--output", png,
                     "--tokens", tokens_file, "--seed", 7)
    assert result.returncode == 0, result.stderr
    tokens = json.loads(tokens_file.read_text())
    # begin-image, height, width, 48 rows of (48 codes + newline), end-image, end-of-turn:
    # 3 + 48 * 49 + 2 = 2357 (the SJD paper: "at least 2357" generated tokens at 768 px).
    assert len(tokens) == 2357
    assert tokens[:3] == [8197, 8828, 8828]
    assert tokens[-2:] == [8196, 8710]
    rows = [tokens[3 + r * 49: 3 + (r + 1) * 49] for r in range(48)]
    assert all(row[-1] == 8803 for row in rows)
    codes = torch.tensor([row[:-1] for row in rows])
    assert bool(((codes >= 4) & (codes <= 8195)).all())
    width, height, pixels = read_png_rgb(png)
    assert (width, height) == (768, 768)
    # The PNG is the reference decoder's image of codebook indices id - 4.
    expected = to_bytes(reference_vqgan(1).decode_float(codes - 4))
    assert (pixels.int() - expected.int()).abs().max() <= 1


def test_other_resolutions_and_a_rejected_one(bundle_dir, tmp_path):
    result = run_sjd("inspect", "--model", bundle_dir)
    assert result.returncode == 0, result.stderr
    assert "48x48 codes -> 768x768 px, 2357 generated tokens" in result.stdout
    tokens_file = tmp_path / "tokens.json"
    result = run_sjd("generate", "--model", bundle_dir, "--prompt", "a cat", "--output", tmp_path / "cat.png",
                     "--tokens", tokens_file, "--resolution", 512, "--cfg", 1.0)
    assert result.returncode == 0, result.stderr
    tokens = json.loads(tokens_file.read_text())
    assert len(tokens) == 3 + 32 * 33 + 2 and tokens[:3] == [8197, 8820, 8820]
    assert read_png_rgb(tmp_path / "cat.png")[:2] == (512, 512)
    result = run_sjd("generate", "--model", bundle_dir, "--prompt", "a cat", "--output", tmp_path / "no.png",
                     "--resolution", 640)
    assert result.returncode == 2
    assert "resolution 640 is not supported (supported: 512, 768, 1024)" in result.stderr
    assert not (tmp_path / "no.png").exists()


def broken_copy(release, tmp_path, edit):
    copy = tmp_path / "broken"
    shutil.copytree(release, copy)
    rewrite_shards(copy / "hf", edit)
    return copy


@pytest.mark.parametrize("name, edit, problem", [
    ("model.layers.1.mlp.up_proj.weight", lambda t: None, "missing"),
    ("model.layers.0.self_attn.k_norm.weight", lambda t: torch.ones(3, t.shape[-1], dtype=t.dtype), "mis-shaped"),
])
def test_a_broken_checkpoint_fails_naming_the_tensor(release, tmp_path, name, edit, problem):
    broken = broken_copy(release, tmp_path, lambda n, t: edit(t) if n == name else t)
    export_with_vqgan(broken, tmp_path / "bundle")  # the export does not read the transformer tensors
    result = run_sjd("generate", "--model", tmp_path / "bundle", "--prompt", "x", "--output", tmp_path / "x.png")
    assert result.returncode == 2, (problem, result.stderr)
    assert name in result.stderr


def test_vq_without_vqgan_ckpt_needs_a_decoder_in_the_shards(release, tmp_path):
    result = export(release, tmp_path / "bundle")
    assert result.returncode == 2
    assert "model.vqmodel.decoder" in result.stderr and "--vqgan-ckpt" in result.stderr


def test_vq_taken_from_the_shards_when_they_hold_the_decoder(release, tmp_path):
    copy = tmp_path / "with_decoder"
    shutil.copytree(release, copy)
    hf = copy / "hf"
    vq_model = reference_vqgan(1)
    state = vq_model.state_dict()
    # The encoder side (quantize, post_quant_conv) is already in the shards: give it this VQ's values,
    # and add the decoder in a shard of its own.
    extra = {f"model.vqmodel.{k}": v.to(torch.bfloat16) for k, v in state.items() if k.startswith("decoder.")}
    save_file(extra, str(hf / "model-vqdecoder.safetensors"), metadata={"format": "pt"})
    rewrite_shards(hf, lambda n, t: state[n[len("model.vqmodel."):]].to(t.dtype)
                   if n.startswith("model.vqmodel.") and n[len("model.vqmodel."):] in state else t)
    index = json.loads((hf / "model.safetensors.index.json").read_text())
    index["weight_map"].update({k: "model-vqdecoder.safetensors" for k in extra})
    (hf / "model.safetensors.index.json").write_text(json.dumps(index))
    config = json.loads((hf / "config.json").read_text())
    config["vq_config"].update(embed_dim=4, num_embeddings=CODEBOOK, latent_channels=8, base_channels=32,
                               channel_multiplier=[1, 1, 1, 1, 1], num_res_blocks=1, resolution=256,
                               attn_resolutions=None)
    (hf / "config.json").write_text(json.dumps(config))
    result = export(copy, tmp_path / "bundle", "--resolution", "512")
    assert result.returncode == 0, result.stderr
    codes = torch.randint(CODEBOOK, (2, 3), generator=torch.Generator().manual_seed(5))
    request = tmp_path / "codes.json"
    request.write_text(json.dumps({"codes": codes.tolist()}))
    result = run_sjd("inspect", "--model", tmp_path / "bundle", "--decode", request, "--out", tmp_path / "img.st")
    assert result.returncode == 0, result.stderr
    ours = load_file(str(tmp_path / "img.st"))["image"]
    # The shards hold bf16 weights: the reference gets the same rounded values.
    rounded = reference_vqgan(1)
    rounded.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in vq_model.state_dict().items()})
    assert (ours - rounded.decode_float(codes)).abs().max() <= 1e-4


def test_permuted_image_vocabulary_is_followed(tmp_path):
    # If a release's IMGIMG names were not in codebook order, token id 4 + i must still
    # decode as the codebook entry its name spells.
    order = torch.randperm(CODEBOOK, generator=torch.Generator().manual_seed(11)).tolist()
    write_release(tmp_path / "release", image_order=order)
    bundle = export_with_vqgan(tmp_path / "release", tmp_path / "bundle", "--resolution", "512")
    assert bundle["layout"]["image_token_first"] == 4
    assert bundle["source"]["codebook_rows"] == "permuted to token-id order"
    offsets = torch.randint(CODEBOOK, (2, 3), generator=torch.Generator().manual_seed(6))  # token id - 4
    request = tmp_path / "codes.json"
    request.write_text(json.dumps({"codes": offsets.tolist()}))
    result = run_sjd("inspect", "--model", tmp_path / "bundle", "--decode", request, "--out", tmp_path / "img.st")
    assert result.returncode == 0, result.stderr
    ours = load_file(str(tmp_path / "img.st"))["image"]
    codebook_indices = torch.tensor(order)[offsets]
    assert (ours - reference_vqgan(1).decode_float(codebook_indices)).abs().max() <= 1e-4
    assert (ours - reference_vqgan(1).decode_float(offsets)).abs().max() > 1e-2


def test_export_rejects_an_unsupported_resolution(release, tmp_path):
    result = export(release, tmp_path / "bundle", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"), "--resolution", "640")
    assert result.returncode != 0 and "640" in result.stderr


def test_export_takes_other_resolutions_top_k_and_cfg(release, tmp_path):
    """The default model is exported this way: its own image side and sampling defaults, same ids and tensors."""
    bundle = export_with_vqgan(release, tmp_path / "bundle", "--resolutions", "256,512", "--resolution", "256",
                               "--top-k", "100", "--cfg", "2.5")
    assert bundle["layout"]["resolutions"] == [256, 512]
    assert (bundle["layout"]["grid_height"], bundle["layout"]["grid_width"]) == (16, 16)  # 256 px / 16
    assert bundle["defaults"]["top_k"] == 100 and bundle["defaults"]["cfg"] == 2.5
    assert export_with_vqgan(release, tmp_path / "plain")["defaults"]["cfg"] == 3.0  # Lumina-mGPT's own
    off_grid = export(release, tmp_path / "off", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                      "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"), "--resolutions", "256,200",
                      "--resolution", "256")
    assert off_grid.returncode == 2 and "200 px" in off_grid.stderr
    outside = export(release, tmp_path / "outside", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                     "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"), "--resolutions", "256", "--resolution", "512")
    assert outside.returncode == 2 and "--resolution 512" in outside.stderr
    negative = export(release, tmp_path / "negative", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                      "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"), "--top-k", "-5")
    assert negative.returncode == 2 and "--top-k -5" in negative.stderr
    assert not (tmp_path / "negative" / "bundle.json").exists()
    for cfg in ("nan", "inf"):  # written as NaN / Infinity, JSON that sjd could not read
        refused = export(release, tmp_path / cfg, "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                         "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"), "--cfg", cfg)
        assert refused.returncode == 2 and f"--cfg {cfg}" in refused.stderr
        assert not (tmp_path / cfg).exists()


def test_export_rejects_a_vocabulary_that_disagrees_with_the_tokenizer(release, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    config = json.loads((copy / "hf" / "config.json").read_text())
    config["vocabulary_map"]["<reserved08799>"] = 8900
    (copy / "hf" / "config.json").write_text(json.dumps(config))
    result = export(copy, tmp_path / "bundle", "--vqgan-ckpt", str(copy / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(copy / "vq" / "vqgan.yaml"))
    assert result.returncode == 2
    assert "<reserved08799>" in result.stderr and "8900" in result.stderr


@pytest.mark.parametrize("edit, problem", [
    # Each was a traceback (TypeError, ZeroDivisionError) or a message naming neither file nor key.
    (lambda c: c.update(hidden_size=[32]), '"hidden_size" is [32], expected an integer >= 1'),
    (lambda c: c.update(hidden_size="abc"), '"hidden_size" is \'abc\', expected an integer >= 1'),
    (lambda c: c.update(num_attention_heads=0), '"num_attention_heads" is 0, expected an integer >= 1'),
    (lambda c: c.update(rope_theta="big"), '"rope_theta" is \'big\', expected a finite number'),
    (lambda c: c.update(vocabulary_map=[1, 2]), "vocabulary_map is not an object of token -> id"),
])
def test_a_bad_config_value_is_one_line_naming_the_file_and_key(release, tmp_path, edit, problem):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    config = json.loads((copy / "hf" / "config.json").read_text())
    edit(config)
    (copy / "hf" / "config.json").write_text(json.dumps(config))
    result = export(copy, tmp_path / "bundle", "--vqgan-ckpt", str(copy / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(copy / "vq" / "vqgan.yaml"))
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"export_bundle: {copy / 'hf' / 'config.json'}: {problem}\n"


def test_a_bad_vqgan_yaml_or_unreadable_checkpoint_is_one_line_naming_the_file(release, tmp_path):
    yaml_file, ckpt = tmp_path / "vqgan.yaml", tmp_path / "vqgan.ckpt"
    yaml_file.write_text("model: [1, 2:\n")
    result = export(release, tmp_path / "a", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(yaml_file))
    assert result.returncode == 2 and result.stderr.startswith(f"export_bundle: {yaml_file}: not a YAML file")
    assert len(result.stderr.splitlines()) == 1  # the parser's own message ran over several lines, as a traceback
    # A checkpoint pickling a class of a module that is not installed (a training script's own).
    ckpt.write_bytes(b"\x80\x02cno_such_training_module\nConfig\nq\x00)\x81q\x01.")
    result = export(release, tmp_path / "b", "--vqgan-ckpt", str(ckpt), "--vqgan-yaml",
                    str(release / "vq" / "vqgan.yaml"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"export_bundle: {ckpt}: cannot be read") and "Traceback" not in result.stderr


def test_a_bad_vqgan_yaml_number_is_named_by_the_release_key(release, tmp_path):
    # It was named by the bundle's key ("codebook_size"), which the YAML does not have.
    import yaml

    config = yaml.safe_load((release / "vq" / "vqgan.yaml").read_text())
    config["model"]["params"]["n_embed"] = "many"
    bad = tmp_path / "vqgan.yaml"
    bad.write_text(yaml.safe_dump(config))
    result = export(release, tmp_path / "bundle", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(bad))
    assert result.returncode == 2
    assert result.stderr == f"export_bundle: {bad}: model.params: \"n_embed\" is 'many', expected an integer >= 1\n"


def test_an_export_stopped_before_leaves_no_staging_folder_after_the_next(release, tmp_path):
    # A staging folder of a process that is gone (killed, out of memory) held its weights for good.
    pid = 4194000
    while True:
        try:
            os.kill(pid, 0)
            pid -= 1
        except ProcessLookupError:
            break
        except PermissionError:
            pid -= 1
    abandoned = tmp_path / f".bundle.export-{pid}-abc123"
    abandoned.mkdir()
    (abandoned / "vqgan.safetensors").write_bytes(b"weights of a stopped export")
    export_with_vqgan(release, tmp_path / "bundle")
    assert not abandoned.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_bundle_folder_name_of_250_bytes_is_exported(release, tmp_path):
    # The staging folder beside it took the name and 25 bytes more: past 255, the export failed.
    name = "é" + "b" * 248
    assert len(os.fsencode(name)) == 250
    export_with_vqgan(release, tmp_path / name)
    assert (tmp_path / name / "bundle.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_out_that_links_to_another_file_system_is_written_there(release, tmp_path):
    # The staging folder lay beside the link, so the moves into its target failed: "Invalid cross-device link".
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm on another file system")
    target = Path(tempfile.mkdtemp(dir=shm, prefix="sjd_export_test_"))
    try:
        (tmp_path / "linked").symlink_to(target)
        export_with_vqgan(release, tmp_path / "linked")
        assert (target / "bundle.json").is_file() and (target / "vqgan.safetensors").is_file()
        assert [p.name for p in shm.iterdir() if p.name.startswith(f".{target.name}.export-")] == []
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_a_dangling_link_as_out_is_refused_in_one_line(release, tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    result = export(release, tmp_path / "dangling", "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"))
    assert result.returncode == 2 and result.stderr.startswith(f"export_bundle: --out {tmp_path / 'dangling'}: a link")


def hf_cache_snapshot(folder, hub):
    """`folder` laid out as the Hugging Face cache lays out a download: every file of snapshots/REV/ a relative
    link into blobs/."""
    blobs, snapshot = hub / "blobs", hub / "snapshots" / "0123abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for number, file in enumerate(sorted(folder.iterdir())):
        shutil.copyfile(file, blobs / f"blob{number}")
        (snapshot / file.name).symlink_to(os.path.relpath(blobs / f"blob{number}", snapshot))
    return snapshot


def test_export_into_a_hugging_face_cache_snapshot_leaves_the_release_as_it_was(release, tmp_path):
    # The index resolves into blobs/, so the exporter took the snapshot for another folder and relinked every
    # shard to itself (exit 0, a bundle that could not load); a --tokenizer copy wrote through the release's
    # tokenizer.json link into its blob.
    snapshot = hf_cache_snapshot(release / "hf", tmp_path / "hub")
    before = {file.name: (os.readlink(file), file.read_bytes()) for file in snapshot.iterdir()}
    meta_tokenizer = tmp_path / "text_tokenizer.json"
    meta_tokenizer.write_text(json.dumps(json.loads((release / "hf" / "tokenizer.json").read_text()), indent=1))
    result = subprocess.run([sys.executable, str(EXPORT), "lumina-mgpt", "--hf-dir", str(snapshot), "--out",
                             str(snapshot), "--tokenizer", str(meta_tokenizer),
                             "--vqgan-ckpt", str(release / "vq" / "vqgan.ckpt"),
                             "--vqgan-yaml", str(release / "vq" / "vqgan.yaml")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for name, (link, data) in before.items():
        assert os.readlink(snapshot / name) == link and (snapshot / name).read_bytes() == data, name
    bundle = json.loads((snapshot / "bundle.json").read_text())
    assert bundle["tokenizer"]["file"] == "sjd_tokenizer.json"
    assert (snapshot / "sjd_tokenizer.json").read_bytes() == meta_tokenizer.read_bytes()
    loaded = run_sjd("inspect", "--model", snapshot)
    assert loaded.returncode == 0, loaded.stderr


def test_a_refused_config_writes_nothing(release, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    config = json.loads((copy / "hf" / "config.json").read_text())
    config["tie_word_embeddings"] = True
    (copy / "hf" / "config.json").write_text(json.dumps(config))
    result = export(copy, tmp_path / "bundle", "--vqgan-ckpt", str(copy / "vq" / "vqgan.ckpt"),
                    "--vqgan-yaml", str(copy / "vq" / "vqgan.yaml"))
    assert result.returncode == 2 and "tie_word_embeddings" in result.stderr
    assert not (tmp_path / "bundle").exists() or not any((tmp_path / "bundle").iterdir())


def test_a_truncated_vqgan_checkpoint_is_one_line_not_a_traceback(release, tmp_path):
    truncated = tmp_path / "vqgan.ckpt"
    truncated.write_bytes((release / "vq" / "vqgan.ckpt").read_bytes()[:1000])
    result = export(release, tmp_path / "bundle", "--vqgan-ckpt", str(truncated),
                    "--vqgan-yaml", str(release / "vq" / "vqgan.yaml"))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("export_bundle: ")
