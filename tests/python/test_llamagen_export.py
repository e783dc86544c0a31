"""LlamaGen T2I end to end: a tiny release in the real layout -> export_bundle.py llamagen -> sjd.

The release is written at tiny widths with the real file formats and names:
  t2i_XL_stage1_256.pt  torch pickle {"model": GPT state dict with LlamaGen's key names
                        (tok_embeddings, layers.{i}.attention.wqkv/wo, feed_forward.w1/w3/w2,
                        attention_norm/ffn_norm, norm, output, cls_embedding.cap_proj.fc1/fc2 and
                        the cls_embedding.uncond_embedding buffer), "optimizer", "steps",
                        "args": argparse.Namespace as train_t2i.py saves it}
  vq_ds16_t2i.pt        {"model": VQ-16 state dict: encoder side, quant_conv, quantize.embedding
                        and quantize.codebook_used, post_quant_conv, decoder.conv_in/mid/conv_blocks/...}
  flan-t5-xl/           transformers' T5EncoderModel.save_pretrained (config.json, model.safetensors)
                        and a SentencePiece model trained here with T5's ids (pad 0, </s> 1, unk 2).
Geometry is real: 120 caption slots, VQ with 16 pixels per code, 16x16 codes -> 256 px
(32x32 -> 512 px for the 512 export). Then `sjd generate` must write such a PNG, broken
checkpoints must make it exit 2 naming the tensor, and `sjd tokenize --template` must give
the T5 ids LlamaGen's tokenizer call gives (cleaned text, at most 119 pieces, then </s>).

Other tests import the helpers (write_release, export, run_sjd) from here.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece
import torch
from safetensors.torch import load_file, save_file

SOURCE_DIR = Path(os.environ.get("SJD_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("SJD_BUILD_DIR", SOURCE_DIR / "build"))
SJD = BUILD_DIR / "sjd"
EXPORTER = SOURCE_DIR / "scripts" / "export_bundle.py"

# Tiny widths; caption length, codebook/vocab identity and 16 px per code as in the release.
HIDDEN, HEADS, LAYERS, FFN = 64, 4, 2, 176
CODEBOOK, CODE_DIM = 64, 8
CAPTION = 120
T5 = dict(vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4)
VQ_CH, VQ_MULT, VQ_Z, VQ_RES_BLOCKS = 32, [1, 1, 1, 1, 2], 32, 2

WORDS = ("a photo of the red blue green cat dog sitting on table under bright sunny day with many people "
         "walking street city night sky stars painting watercolor portrait landscape astronaut riding horse "
         "forest river").split()


def run_sjd(*args, check=True):
    if not SJD.is_file():
        pytest.fail(f"{SJD} not built (set SJD_BUILD_DIR)")
    result = subprocess.run([str(SJD), *map(str, args)], capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        pytest.fail(f"sjd {' '.join(map(str, args))} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def export(release, out, *extra):
    return subprocess.run(
        [sys.executable, str(EXPORTER), "llamagen", "--gpt-ckpt", str(release / "t2i_XL_stage1_256.pt"),
         "--vq-ckpt", str(release / "vq_ds16_t2i.pt"), "--t5-dir", str(release / "flan-t5-xl"), "--out", str(out),
         "--num-heads", str(HEADS), *extra],
        capture_output=True, text=True, timeout=600)


# --------------------------------------------------------------------------- the tiny release


def gpt_state_dict(gen):
    def normal(*shape, scale):
        return torch.randn(*shape, generator=gen) * scale

    sd = {
        "cls_embedding.cap_proj.fc1.weight": normal(HIDDEN, T5["d_model"], scale=T5["d_model"] ** -0.5),
        "cls_embedding.cap_proj.fc2.weight": normal(HIDDEN, HIDDEN, scale=HIDDEN ** -0.5),
        "cls_embedding.uncond_embedding": normal(CAPTION, T5["d_model"], scale=T5["d_model"] ** -0.5),
        "tok_embeddings.weight": normal(CODEBOOK, HIDDEN, scale=1.0),
    }
    for i in range(LAYERS):
        p = f"layers.{i}."
        sd[p + "attention.wqkv.weight"] = normal(3 * HIDDEN, HIDDEN, scale=HIDDEN ** -0.5)
        sd[p + "attention.wo.weight"] = normal(HIDDEN, HIDDEN, scale=HIDDEN ** -0.5)
        sd[p + "feed_forward.w1.weight"] = normal(FFN, HIDDEN, scale=HIDDEN ** -0.5)
        sd[p + "feed_forward.w3.weight"] = normal(FFN, HIDDEN, scale=HIDDEN ** -0.5)
        sd[p + "feed_forward.w2.weight"] = normal(HIDDEN, FFN, scale=FFN ** -0.5)
        sd[p + "attention_norm.weight"] = 1.0 + normal(HIDDEN, scale=0.1)
        sd[p + "ffn_norm.weight"] = 1.0 + normal(HIDDEN, scale=0.1)
    sd["norm.weight"] = 1.0 + normal(HIDDEN, scale=0.1)
    sd["output.weight"] = normal(CODEBOOK, HIDDEN, scale=HIDDEN ** -0.5)
    return sd


def vq_state_dict(gen):
    sd = {}

    def conv(name, cin, cout, k):
        sd[name + ".weight"] = torch.randn(cout, cin, k, k, generator=gen) * (cin * k * k) ** -0.5
        sd[name + ".bias"] = torch.randn(cout, generator=gen) * 0.1

    def norm(name, c):
        sd[name + ".weight"] = 1.0 + torch.randn(c, generator=gen) * 0.1
        sd[name + ".bias"] = torch.randn(c, generator=gen) * 0.1

    def res(name, cin, cout):
        norm(name + ".norm1", cin)
        conv(name + ".conv1", cin, cout, 3)
        norm(name + ".norm2", cout)
        conv(name + ".conv2", cout, cout, 3)
        if cin != cout:
            conv(name + ".nin_shortcut", cin, cout, 1)

    def attn(name, c):
        norm(name + ".norm", c)
        for part in ("q", "k", "v", "proj_out"):
            conv(f"{name}.{part}", c, c, 1)

    # Encoder side as in vq_ds16_t2i.pt (the exporter must leave it out): a stand-in subset.
    conv("encoder.conv_in", 3, VQ_CH, 3)
    conv("quant_conv", VQ_Z, CODE_DIM, 1)
    codebook = torch.randn(CODEBOOK, CODE_DIM, generator=gen)
    sd["quantize.embedding.weight"] = codebook * torch.linspace(0.5, 2.0, CODEBOOK).unsqueeze(1)  # not unit rows
    sd["quantize.codebook_used"] = torch.zeros(65536)
    conv("post_quant_conv", CODE_DIM, VQ_Z, 1)
    levels = len(VQ_MULT)
    width = VQ_CH * VQ_MULT[-1]
    conv("decoder.conv_in", VQ_Z, width, 3)
    res("decoder.mid.0", width, width)
    attn("decoder.mid.1", width)
    res("decoder.mid.2", width, width)
    for i in range(levels):
        out = VQ_CH * VQ_MULT[levels - 1 - i]
        for j in range(VQ_RES_BLOCKS + 1):
            res(f"decoder.conv_blocks.{i}.res.{j}", width, out)
            width = out
            if i == 0:
                attn(f"decoder.conv_blocks.{i}.attn.{j}", out)
        if i != levels - 1:
            conv(f"decoder.conv_blocks.{i}.upsample.conv", out, out, 3)
    norm("decoder.norm_out", width)
    conv("decoder.conv_out", width, 3, 3)
    return sd


def train_spiece(path):
    rng = random.Random(0)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12))) for _ in range(400)]
    prefix = path.with_suffix("")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=str(prefix), vocab_size=56, model_type="unigram",
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>",
        minloglevel=2)
    if prefix.with_suffix(".model") != path:
        prefix.with_suffix(".model").rename(path)


def write_t5(directory):
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(7)
    config = T5Config(**T5, feed_forward_proj="gated-gelu", relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, layer_norm_epsilon=1e-6, dropout_rate=0.0)
    model = T5EncoderModel(config).eval()
    model.save_pretrained(str(directory))
    train_spiece(directory / "spiece.model")
    return model


def write_release(directory, gpt_edit=None, vq_edit=None, t5_edit=None):
    """Writes the tiny release; the *_edit callbacks may break a state dict (tests of errors)."""
    directory.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(1234)
    gpt = gpt_state_dict(gen)
    vq = vq_state_dict(gen)
    if gpt_edit:
        gpt_edit(gpt)
    if vq_edit:
        vq_edit(vq)
    args = argparse.Namespace(gpt_model="GPT-XL", gpt_type="t2i", image_size=256, downsample_size=16,
                              cls_token_num=CAPTION, vocab_size=CODEBOOK, global_batch_size=256)
    optimizer = {"state": {}, "param_groups": [{"lr": 1e-4, "params": list(range(len(gpt)))}]}
    torch.save({"model": gpt, "optimizer": optimizer, "steps": 1000, "args": args}, directory / "t2i_XL_stage1_256.pt")
    torch.save({"model": vq}, directory / "vq_ds16_t2i.pt")
    t5_dir = directory / "flan-t5-xl"
    write_t5(t5_dir)
    if t5_edit:
        weights = load_file(str(t5_dir / "model.safetensors"))
        t5_edit(weights)
        save_file(weights, str(t5_dir / "model.safetensors"), metadata={"format": "pt"})
    return directory


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("llamagen_release"))


@pytest.fixture(scope="module")
def bundle(release, tmp_path_factory):
    out = tmp_path_factory.mktemp("llamagen_bundle") / "b256"
    result = export(release, out)
    assert result.returncode == 0, result.stderr
    return out


# --------------------------------------------------------------------------- tests


def png_size(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_export_writes_the_bundle(bundle, release):
    b = json.loads((bundle / "bundle.json").read_text())
    assert b["family"] == "llamagen"
    t = b["transformer"]
    assert (t["key_style"], t["rope"], t["grid_width"], t["caption_length"]) == ("llamagen", "2d", 16, CAPTION)
    assert (t["hidden_size"], t["num_heads"], t["head_dim"], t["num_layers"], t["intermediate_size"]) == (
        HIDDEN, HEADS, HIDDEN // HEADS, LAYERS, FFN)
    assert b["layout"] == {"kind": "llamagen", "grid_height": 16, "grid_width": 16, "image_token_first": 0,
                           "codebook_size": CODEBOOK}
    assert b["tokenizer"] == {"kind": "spm", "file": "spiece.model"}
    v = b["vq"]
    assert (v["kind"], v["ch"], v["ch_mult"], v["num_res_blocks"], v["downsample"], v["codebook_l2_norm"]) == (
        "vq16", VQ_CH, VQ_MULT, VQ_RES_BLOCKS, 16, True)
    te = b["text_encoder"]
    assert te["kind"] == "t5-encoder" and all(te[k] == T5[k] for k in T5)
    t5 = load_file(str(bundle / "t5_encoder.safetensors"))
    assert "shared.weight" in t5 and all(k == "shared.weight" or k.startswith("encoder.") for k in t5)
    assert all(x.dtype == torch.float32 for x in t5.values())
    vq = load_file(str(bundle / "vq16.safetensors"))
    assert not any(k.startswith(("encoder.", "quant_conv.", "quantize.codebook_used")) for k in vq)
    gpt = load_file(str(bundle / "gpt.safetensors"))
    original = torch.load(release / "t2i_XL_stage1_256.pt", weights_only=False)["model"]
    assert set(gpt) == set(original) and all(torch.equal(gpt[k], original[k]) for k in gpt)
    assert b["defaults"] == {"cfg": 7.5, "temperature": 1.0, "top_k": 1000, "method": "ar"}


def test_generate_writes_a_256px_png_of_16x16_codes(bundle, tmp_path):
    out, tokens = tmp_path / "cat.png", tmp_path / "tokens.json"
    run_sjd("generate", "--model", bundle, "--prompt", "A red cat sitting on the table", "--output", out,
            "--tokens", tokens, "--seed", 3, "--config", SOURCE_DIR / "configs" / "llamagen_t2i_xl_256.json")
    assert png_size(out) == (256, 256)
    ids = json.loads(tokens.read_text())
    assert len(ids) == 16 * 16 and all(0 <= i < CODEBOOK for i in ids)
    assert len(set(ids)) > 8  # a real sampled grid, not one repeated code


def test_a_caption_past_120_t5_tokens_is_cut_with_a_warning_naming_the_rest(bundle, tmp_path):
    prompt = " ".join(["cat dog"] * 80) + " under a purple moon"
    result = run_sjd("generate", "--model", bundle, "--prompt", prompt, "--output", tmp_path / "long.png",
                     "--config", SOURCE_DIR / "configs" / "llamagen_t2i_xl_256.json")
    assert "sjd: warning: the caption takes" in result.stderr
    assert "the model reads the first 119" in result.stderr and "under a purple moon" in result.stderr
    assert png_size(tmp_path / "long.png") == (256, 256)
    short = run_sjd("generate", "--model", bundle, "--prompt", "a red cat", "--output", tmp_path / "short.png",
                    "--config", SOURCE_DIR / "configs" / "llamagen_t2i_xl_256.json")
    assert "warning" not in short.stderr


def test_the_512_export_is_a_32x32_grid(release, tmp_path):
    out = tmp_path / "b512"
    result = export(release, out, "--image-size", "512")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "bundle.json").read_text())["transformer"]["grid_width"] == 32
    summary = run_sjd("inspect", "--model", out).stdout
    assert "32x32 codes -> 512x512 px, 1024 generated tokens" in summary


def test_the_torchscript_export_keeps_no_safetensors_copy_of_what_it_archived(release, tmp_path):
    # gpt.safetensors, a multi-gigabyte file of the real model, stayed beside model.pt.
    out = tmp_path / "archived"
    result = export(release, out, "--weights-format", "torchscript")
    assert result.returncode == 0, result.stderr
    bundle = json.loads((out / "bundle.json").read_text())
    assert bundle["transformer"]["weights"] == ["model.pt"] and bundle["vq"]["weights"] == ["vq.pt"]
    assert not (out / "gpt.safetensors").exists() and not (out / "vq16.safetensors").exists()
    # The report names the files the bundle has (it listed the removed safetensors files).
    listed = [line.split(":")[0].strip() for line in result.stdout.splitlines()[1:]]
    assert sorted(listed) == ["bundle.json", "model.pt", "spiece.model", "t5_encoder.safetensors", "vq.pt"]
    summary = run_sjd("inspect", "--model", out, "--trust-code").stdout
    assert "16x16 codes -> 256x256 px" in summary


def test_a_failed_re_export_leaves_the_bundle_as_it_was(release, bundle, tmp_path):
    # A re-export that failed while writing left the new GPT weights beside the old bundle.json: a bundle that
    # loads, made of two exports.
    import resource

    out = tmp_path / "again"
    shutil.copytree(bundle, out)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    other = tmp_path / "other_gpt.pt"
    checkpoint = torch.load(release / "t2i_XL_stage1_256.pt", weights_only=False)
    checkpoint["model"] = {name: tensor * 2 for name, tensor in checkpoint["model"].items()}
    torch.save(checkpoint, other)
    # A file-size limit that the GPT's file (written first) passes and the VQ's (written next) does not.
    gpt_bytes, vq_bytes = (out / "gpt.safetensors").stat().st_size, (out / "vq16.safetensors").stat().st_size
    limit = (gpt_bytes + vq_bytes) // 2
    assert gpt_bytes < limit < vq_bytes
    result = subprocess.run(
        [sys.executable, str(EXPORTER), "llamagen", "--gpt-ckpt", str(other), "--vq-ckpt",
         str(release / "vq_ds16_t2i.pt"), "--t5-dir", str(release / "flan-t5-xl"), "--out", str(out),
         "--num-heads", str(HEADS)],
        capture_output=True, text=True, timeout=600,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("export_bundle: ")
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert not list(tmp_path.glob(".again.export-*"))  # the staging folder went with the failure


def test_bundle_files_follow_the_umask(release, tmp_path):
    # They were owner-only (0600: mkstemp's and safetensors' mode) whatever the umask: a shared models/ folder
    # could not be read by the others it was shared with.
    out = tmp_path / "shared"
    result = subprocess.run(
        [sys.executable, str(EXPORTER), "llamagen", "--gpt-ckpt", str(release / "t2i_XL_stage1_256.pt"),
         "--vq-ckpt", str(release / "vq_ds16_t2i.pt"), "--t5-dir", str(release / "flan-t5-xl"), "--out", str(out),
         "--num-heads", str(HEADS)],
        capture_output=True, text=True, timeout=600, preexec_fn=lambda: os.umask(0o022))
    assert result.returncode == 0, result.stderr
    modes = {path.name: path.stat().st_mode & 0o777 for path in out.iterdir()}
    assert modes == {name: 0o644 for name in modes} and "bundle.json" in modes
    assert out.stat().st_mode & 0o777 == 0o755


def test_another_resolution_is_rejected_naming_the_supported_one(bundle, tmp_path):
    result = run_sjd("generate", "--model", bundle, "--prompt", "a cat", "--output", tmp_path / "x.png",
                     "--resolution", 512, check=False)
    assert result.returncode == 2
    assert "resolution 512 is not supported" in result.stderr and "supported: 256" in result.stderr


def test_template_ids_are_the_t5_input(bundle):
    processor = sentencepiece.SentencePieceProcessor(model_file=str(bundle / "spiece.model"))
    for prompt in ["A photo of the  RED cat", "astronaut riding a horse in the forest",
                   " ".join(["cat dog"] * 80)]:
        cleaned = " ".join(prompt.lower().split())  # LlamaGen's cleaner does only this to these prompts
        want = processor.encode(cleaned)[:CAPTION - 1] + [1]  # max_length 120 with truncation, </s> appended
        got = json.loads(run_sjd("tokenize", "--model", bundle, "--template", prompt).stdout)
        assert got == want


BROKEN = [
    ("gpt-missing", dict(gpt_edit=lambda sd: sd.pop("layers.1.attention.wo.weight")), "layers.1.attention.wo.weight"),
    ("gpt-shape", dict(gpt_edit=lambda sd: sd.__setitem__("cls_embedding.cap_proj.fc2.weight", torch.zeros(HIDDEN, 8))),
     "cls_embedding.cap_proj.fc2.weight"),
    ("vq-missing", dict(vq_edit=lambda sd: sd.pop("decoder.conv_blocks.0.attn.2.k.weight")),
     "decoder.conv_blocks.0.attn.2.k.weight"),
    ("t5-missing", dict(t5_edit=lambda w: w.pop("encoder.block.1.layer.1.DenseReluDense.wo.weight")),
     "encoder.block.1.layer.1.DenseReluDense.wo.weight"),
]


@pytest.mark.parametrize("case,edit,tensor", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_checkpoint_fails_naming_the_tensor(tmp_path, case, edit, tensor):
    release = write_release(tmp_path / "release", **edit)
    out = tmp_path / "bundle"
    result = export(release, out)
    assert result.returncode == 0, result.stderr  # the exporter copies tensors; sjd checks them
    result = run_sjd("generate", "--model", out, "--prompt", "a cat", "--output", tmp_path / "x.png", check=False)
    assert result.returncode == 2, result.stderr
    assert tensor in result.stderr


def test_the_exporter_names_a_tensor_it_needs(tmp_path):
    release = write_release(tmp_path / "release", gpt_edit=lambda sd: sd.pop("cls_embedding.uncond_embedding"))
    result = export(release, tmp_path / "bundle")
    assert result.returncode == 2
    assert "cls_embedding.uncond_embedding" in result.stderr
