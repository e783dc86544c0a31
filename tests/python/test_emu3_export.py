"""export_bundle.py emu3 on a tiny checkpoint in the exact Emu3-Gen release layout, then sjd on it.

The release is rebuilt here at tiny widths with the real ids and file formats:
  - Emu3-Gen: transformers' Emu3ForCausalLM (the text model; BAAI/Emu3-Gen stores the same
    `model.*` / `lm_head.weight` names) saved with save_pretrained in several fp32 shards +
    model.safetensors.index.json, given the release's config.json keys (model_type "Emu3", top-level
    rope_theta, image_area, the *_token_id fields) and the real vocab_size 184622; emu3.tiktoken
    (`base64 rank` lines: the 256 bytes and a few merges), emu3_vision_tokens.txt (<|image token|>,
    <|image start|>, <|image end|>, then the 32768 visual tokens), tokenizer_config.json;
  - Emu3-VisionTokenizer: transformers' Emu3VQVAE at tiny width (4 levels, so the real 90x90 grid
    decodes to 720 px), its tensors renamed to the release's Emu3VisionVQModel names (decoder.mid.*,
    decoder.up.{i}.*, 1x1-conv attention q/k/v/proj_out, the attention's SpatialNorm as attn.{j}.norm)
    in model.safetensors + the release's config.json keys (ch, ch_mult, z_channels, attn_resolutions).
Special-token ids follow tokenization_emu3.py: numbered from 151643 (<|endoftext|>, <|im_start|>,
<|im_end|>, <|extra_0..204|>, then emu3_vision_tokens.txt), so bos <|extra_203|> is 151849.
`sjd generate` must then write the real geometry: 8193 generated tokens and a 720x720 PNG (opt-in, see
test_generate_writes_the_real_720px_geometry; every run checks the same path at 64 px).
The binary is $SJD_BUILD_DIR/sjd (CTest sets SJD_BUILD_DIR). Logit and pixel parity with
transformers is test_emu3_parity.py, which builds on the helpers here.
"""
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ROOT / "scripts" / "export_bundle.py"


SPECIAL_START = 151643
VOCAB_SIZE = 184622
CODEBOOK = 32768
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
VISION_HEAD = ["<|image token|>", "<|image start|>", "<|image end|>"]
VISUAL = "<|visual token {:06d}|>"
TOKEN_NAMES = {"bos_token": "<|extra_203|>", "eos_token": "<|extra_204|>", "pad_token": "<|endoftext|>",
               "img_token": "<|image token|>", "boi_token": "<|image start|>", "eoi_token": "<|image end|>",
               "eol_token": "<|extra_200|>", "eof_token": "<|extra_201|>"}
# Emu3's Qwen split pattern (tokenization_emu3.py PAT_STR).
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
           r"\s*[\r\n]+|\s+(?!\S)|\s+")
POSITIVE = " masterpiece, film grained, best quality."
NEGATIVE = ("lowres, bad anatomy, bad hands, text, error, missing fingers, extra digit, fewer digits, cropped, "
            "worst quality, low quality, normal quality, jpeg artifacts, signature, watermark, username, blurry.")
WORDS = ("masterpiece film grained best quality lowres bad anatomy hands text error missing fingers extra digit "
         "fewer digits cropped worst low normal jpeg artifacts signature watermark username blurry a red fox in "
         "the snow oil painting portrait of young girl").split()

TINY_TEXT = dict(vocab_size=VOCAB_SIZE, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=9216, rms_norm_eps=1e-5)
# Generation geometry needs 4 levels (8x); attention only in the middle block keeps a 90x90 decode quick.
TINY_VQ_FAST = dict(codebook_size=CODEBOOK, embed_dim=4, latent_channels=4, base_channels=32,
                    channel_multiplier=[1, 1, 1, 1], num_res_blocks=1, attn_resolutions=[], hidden_size=32,
                    num_attention_heads=1, temporal_downsample_factor=4)
# Every block kind for parity: channel changes (nin_shortcut), attention at level 3, 3 blocks per level.
TINY_VQ_FULL = dict(codebook_size=CODEBOOK, embed_dim=4, latent_channels=4, base_channels=32,
                    channel_multiplier=[1, 2, 2, 4], num_res_blocks=2, attn_resolutions=[3], hidden_size=128,
                    num_attention_heads=1, temporal_downsample_factor=4)


def special_ids():
    names = QWEN_SPECIALS + VISION_HEAD + [VISUAL.format(i) for i in range(CODEBOOK)]
    return {name: SPECIAL_START + i for i, name in enumerate(names)}


def vocabulary_ranks():
    """bytes -> rank: every byte, then each word's prefixes (with and without a leading space)."""
    ranks = {bytes([b]): b for b in range(256)}
    for word in WORDS + ["90", "*", ", "]:
        for text in (word, " " + word):
            data = text.encode()
            for end in range(2, len(data) + 1):
                ranks.setdefault(data[:end], len(ranks))
    return ranks


def write_tokenizer_files(directory):
    ranks = vocabulary_ranks()
    lines = [f"{base64.b64encode(token).decode()} {rank}" for token, rank in ranks.items()]
    (directory / "emu3.tiktoken").write_text("\n".join(lines) + "\n")
    vision = VISION_HEAD + [VISUAL.format(i) for i in range(CODEBOOK)]
    (directory / "emu3_vision_tokens.txt").write_text("\n".join(vision) + "\n")
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "auto_map": {"AutoTokenizer": ["tokenization_emu3.Emu3Tokenizer", None]},
        "tokenizer_class": "Emu3Tokenizer", "model_max_length": 9216, "padding_side": "left",
        "special_tokens_file": "emu3_vision_tokens.txt", **TOKEN_NAMES}))
    return ranks


def reference_encoding(ranks):
    """tiktoken set up as Emu3Tokenizer sets it up (the text is NFC-normalised before encode)."""
    import tiktoken

    return tiktoken.Encoding("Emu3", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=special_ids())


def randomize(module, seed):
    """Every parameter random, seeded: weights ~ N(0, 1/fan_in), norm gains ~ 1 + N(0, 0.01), biases
    ~ N(0, 0.01); BatchNorm statistics random too (variances positive)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn_like(p) / (p[0].numel() ** 0.5))
            elif "norm" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.2)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)


def write_emu3_gen(directory, seed=1):
    """BAAI/Emu3-Gen at tiny width; returns the transformers model (eval, fp32)."""
    from transformers import Emu3ForCausalLM, Emu3TextConfig

    directory.mkdir(parents=True, exist_ok=True)
    model = Emu3ForCausalLM(Emu3TextConfig(**TINY_TEXT, rope_parameters={"rope_type": "default",
                                                                          "rope_theta": 1000000.0})).eval()
    randomize(model, seed)
    model.save_pretrained(str(directory), max_shard_size="20MB")
    assert (directory / "model.safetensors.index.json").is_file()
    ids = special_ids()
    (directory / "config.json").write_text(json.dumps({
        "architectures": ["Emu3ForCausalLM"], "auto_map": {"AutoConfig": "configuration_emu3.Emu3Config",
                                                          "AutoModelForCausalLM": "modeling_emu3.Emu3ForCausalLM"},
        "model_type": "Emu3", "attention_dropout": 0.1, "hidden_act": "silu", "initializer_range": 0.02,
        "pretraining_tp": 1, "rope_theta": 1000000.0, "rope_scaling": None, "tie_word_embeddings": False,
        "torch_dtype": "float32", "use_cache": True, "image_area": 518400,
        "pad_token_id": ids["<|endoftext|>"], "bos_token_id": ids["<|extra_203|>"],
        "eos_token_id": ids["<|extra_204|>"], "img_token_id": ids["<|image token|>"],
        "boi_token_id": ids["<|image start|>"], "eoi_token_id": ids["<|image end|>"],
        "eol_token_id": ids["<|extra_200|>"], "eof_token_id": ids["<|extra_201|>"], **TINY_TEXT}, indent=2))
    write_tokenizer_files(directory)
    return model


def release_vq_name(name):
    """transformers' Emu3VQVAE name -> the release's Emu3VisionVQModel name (encoder and decoder)."""
    for side, group, path in (("encoder", "down_block.down", "down"), ("decoder", "up_block.up", "up")):
        if name.startswith(f"{side}.middle_block."):
            rest = name[len(f"{side}.middle_block."):]
            if rest.startswith("attn_norm."):
                return f"{side}.mid.attn_1.norm." + rest[len("attn_norm."):]
            if rest.startswith("attn_1."):
                projection, leaf = rest[len("attn_1."):].split(".")
                return f"{side}.mid.attn_1.{conv_name(projection)}.{leaf}"
            return f"{side}.mid.{rest}"
        if name.startswith(f"{side}.{group}."):
            level, kind, *rest = name[len(f"{side}.{group}."):].split(".")
            if kind == "attn_norms":
                return f"{side}.{path}.{level}.attn.{rest[0]}.norm." + ".".join(rest[1:])
            if kind == "attn":
                return f"{side}.{path}.{level}.attn.{rest[0]}.{conv_name(rest[1])}.{rest[2]}"
            return f"{side}.{path}.{level}.{kind}." + ".".join(rest)
    return name


def conv_name(projection):
    return {"q_proj": "q", "k_proj": "k", "v_proj": "v", "out_proj": "proj_out"}[projection]


def tiny_vq(config, seed):
    from transformers import Emu3VQVAE, Emu3VQVAEConfig

    model = Emu3VQVAE(Emu3VQVAEConfig(**config)).eval()
    randomize(model, seed)
    with torch.no_grad():  # codebook entries of a trained model's scale
        model.quantize.embedding.weight.copy_(torch.randn_like(model.quantize.embedding.weight))
    return model


def write_vision_tokenizer_release(directory, model):
    """BAAI/Emu3-VisionTokenizer's layout: model.safetensors in Emu3VisionVQModel names + its config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, tensor in model.state_dict().items():
        target = release_vq_name(name)
        if target.rsplit(".", 2)[-2] in ("q", "k", "v", "proj_out") and tensor.dim() == 2:
            tensor = tensor[:, :, None, None]
        tensors[target] = tensor.contiguous()
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    c = model.config
    (directory / "config.json").write_text(json.dumps({
        "architectures": ["Emu3VisionVQModel"], "model_type": "Emu3VisionVQ",
        "auto_map": {"AutoConfig": "configuration_emu3visionvq.Emu3VisionVQConfig",
                     "AutoModel": "modeling_emu3visionvq.Emu3VisionVQModel"},
        "codebook_size": c.codebook_size, "embed_dim": c.embed_dim, "z_channels": c.latent_channels,
        "double_z": False, "in_channels": 3, "out_channels": 3,
        "temporal_downsample_factor": c.temporal_downsample_factor, "ch": c.base_channels,
        "ch_mult": list(c.channel_multiplier), "num_res_blocks": c.num_res_blocks,
        "attn_resolutions": list(c.attn_resolutions), "dropout": 0.0, "torch_dtype": "float32"}, indent=2))
    return tensors


# --------------------------------------------------------------------------- running the tools


def sjd_binary():
    build = Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build"))
    binary = build / "sjd"
    assert binary.is_file(), f"{binary} not built (set SJD_BUILD_DIR)"
    return binary


def run_sjd(*args, timeout=600):
    return subprocess.run([str(sjd_binary()), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def export(hf_dir, vq_dir, out, *extra):
    result = subprocess.run([sys.executable, str(EXPORT), "emu3", "--hf-dir", str(hf_dir), "--vision-tokenizer-dir",
                             str(vq_dir), "--out", str(out), *extra], capture_output=True, text=True, timeout=300)
    return result


def png_size(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("emu3_release")
    model = write_emu3_gen(root / "Emu3-Gen")
    vq = tiny_vq(TINY_VQ_FAST, seed=2)
    write_vision_tokenizer_release(root / "Emu3-VisionTokenizer", vq)
    return SimpleNamespace(root=root, hf_dir=root / "Emu3-Gen", vq_dir=root / "Emu3-VisionTokenizer", model=model,
                           vq=vq, ranks=vocabulary_ranks())


@pytest.fixture(scope="module")
def bundle(release):
    out = release.root / "bundle"
    result = export(release.hf_dir, release.vq_dir, out)
    assert result.returncode == 0, result.stderr
    assert "8193 generated tokens" in result.stdout
    return out


# --------------------------------------------------------------------------- tests


def test_bundle_holds_the_release_numbers_and_ids(bundle):
    b = json.loads((bundle / "bundle.json").read_text())
    assert b["family"] == "emu3"
    t = b["transformer"]
    assert (t["vocab_size"], t["num_heads"], t["num_kv_heads"], t["head_dim"]) == (184622, 4, 2, 8)
    assert t["rope"] == "1d" and t["rope_theta"] == 1000000.0 and t["qk_norm"] is False and t["key_style"] == "hf"
    assert t["weights"] == ["model.safetensors.index.json"]  # linked into the bundle: sjd confines names to it
    # Emu3-Gen's ids (configuration_emu3.py defaults), reached from the tokenizer files.
    specials = b["tokenizer"]["special_tokens"]
    assert b["tokenizer"]["kind"] == "tiktoken" and b["tokenizer"]["file"] == "emu3.tiktoken"
    names = b["layout"]["tokens"]
    assert {key: specials[name] for key, name in names.items()} == {
        "bos": 151849, "eos": 151850, "eol": 151846, "eof": 151847, "image_token": 151851, "image_start": 151852,
        "image_end": 151853, "visual_first": 151854, "visual_last": 184621}
    assert specials["<|endoftext|>"] == 151643 and len(specials) == 184622 - 151643
    assert b["layout"]["image_area"] == 518400 and b["layout"]["max_positions"] == 9216
    assert b["layout"]["positive_prompt"] == POSITIVE and b["layout"]["negative_prompt"] == NEGATIVE
    vq = b["vq"]
    assert vq["kind"] == "movq" and vq["downsample"] == 8 and vq["attn_levels"] == []
    assert vq["temporal_downsample_factor"] == 4 and vq["codebook_size"] == 32768
    assert b["defaults"] == {"cfg": 3.0, "temperature": 1.0, "top_k": 2048, "method": "ar"}


def test_inspect_shows_the_real_geometry(bundle):
    result = run_sjd("inspect", "--model", bundle)
    assert result.returncode == 0, result.stderr
    assert "90x90 codes -> 720x720 px, 8193 generated tokens" in result.stdout
    assert "heads 4/2" in result.stdout


def test_prompt_ids_match_emu3s_tokenizer(bundle, release):
    """The conditional row is bos + prompt + positive + image start + "90*90" + image token, tokenised
    as one text with every special allowed, after NFC (Emu3Tokenizer.tokenize)."""
    reference = reference_encoding(release.ranks)
    for prompt in ["portrait of young girl, oil painting", "Cafe\u0301 \u00e9 90*90\na <|extra_200|> inside"]:
        text = "<|extra_203|>" + prompt + POSITIVE + "<|image start|>90*90<|image token|>"
        expected = reference.encode(unicodedata.normalize("NFC", text), allowed_special="all")
        result = run_sjd("tokenize", "--model", bundle, "--template", prompt)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == expected, prompt
    size = reference.encode("90*90", allowed_special="all")
    assert expected[0] == 151849 and expected[-7:] == [151852, *size, 151851]


def test_plain_text_ids_match_tiktoken(bundle, release, tmp_path):
    reference = reference_encoding(release.ranks)
    strings = [NEGATIVE, POSITIVE, "masterpiece" * 3, "  leading and trailing  ", "tabs\tand\r\nlines", "x'll IT'S",
               "数字 123 and \u00c5ngstr\u00f6m", "<|image start|><|visual token 000007|>", "emoji \U0001F98A fox"]
    lines = tmp_path / "strings.jsonl"
    lines.write_text("".join(json.dumps(s) + "\n" for s in strings))
    result = run_sjd("tokenize", "--model", bundle, "--json-lines", lines)
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    assert got == [reference.encode(unicodedata.normalize("NFC", s), allowed_special="all") for s in strings]


def check_sequence(ids, side):
    """side rows of (side visual tokens + eol <|extra_200|>), then eof <|extra_201|>, image end, eos."""
    assert len(ids) == side * (side + 1) + 3
    for t, token in enumerate(ids[:side * (side + 1)]):
        if t % (side + 1) == side:
            assert token == 151846, t
        else:
            assert 151854 <= token <= 184621, t
    assert ids[side * (side + 1):] == [151847, 151853, 151850]


def generate(bundle, tmp_path, *flags):
    png, tokens = tmp_path / "out.png", tmp_path / "tokens.json"
    started = time.monotonic()
    result = run_sjd("generate", "--model", bundle, "--prompt", "a red fox in the snow", "--output", png,
                     "--tokens", tokens, "--seed", "3", *flags, timeout=1800)
    assert result.returncode == 0, result.stderr
    print(f"sjd generate {' '.join(flags)}: {time.monotonic() - started:.1f} s\n{result.stdout}")
    return png_size(png), json.loads(tokens.read_text())


# 8193 AR steps over a 184622-token vocabulary (two CFG rows) take 2 to 3.5 minutes at these tiny
# widths on a shared 2-core machine (measured 112 s and 210 s): the slowest test, kept in CI because
# the real geometry is what a user gets.
def test_generate_writes_the_real_720px_geometry(bundle, tmp_path):
    size, ids = generate(bundle, tmp_path)
    assert size == (720, 720)
    check_sequence(ids, 90)


def test_generate_at_64px_runs_the_same_path(bundle, tmp_path):
    size, ids = generate(bundle, tmp_path, "--resolution", "64")
    assert size == (64, 64)
    check_sequence(ids, 8)


def test_resolutions_off_the_8_pixel_grid_or_past_the_context_are_refused(bundle, tmp_path):
    bad = run_sjd("generate", "--model", bundle, "--prompt", "a fox", "--output", tmp_path / "x.png",
                  "--resolution", "100")
    assert bad.returncode == 2 and "resolution 100" in bad.stderr and "96 or 104" in bad.stderr
    too_long = run_sjd("generate", "--model", bundle, "--prompt", "a fox", "--output", tmp_path / "y.png",
                       "--resolution", "1024")
    assert too_long.returncode == 2 and "9216" in too_long.stderr


def copy_bundle(bundle, release, target):
    """A self-contained copy of the bundle with the transformer in one local model.safetensors."""
    target.mkdir()
    for name in ("emu3.tiktoken", "movq.safetensors"):
        shutil.copyfile(bundle / name, target / name)
    tensors = {}
    for shard in sorted(release.hf_dir.glob("model-*.safetensors")):
        tensors.update(load_file(str(shard)))
    b = json.loads((bundle / "bundle.json").read_text())
    b["transformer"]["weights"] = ["model.safetensors"]
    (target / "bundle.json").write_text(json.dumps(b))
    return tensors


def test_a_missing_or_misshaped_tensor_fails_naming_it(bundle, release, tmp_path):
    missing = tmp_path / "missing"
    tensors = copy_bundle(bundle, release, missing)
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, str(missing / "model.safetensors"))
    result = run_sjd("generate", "--model", missing, "--prompt", "a fox", "--output", tmp_path / "a.png")
    assert result.returncode == 2
    assert "model.layers.1.mlp.up_proj.weight" in result.stderr

    misshaped = tmp_path / "misshaped"
    tensors = copy_bundle(bundle, release, misshaped)
    save_file(tensors, str(misshaped / "model.safetensors"))
    vq = load_file(str(misshaped / "movq.safetensors"))
    vq["decoder.time_conv.1.conv.conv.weight"] = vq["decoder.time_conv.1.conv.conv.weight"][:, :, :2].contiguous()
    save_file(vq, str(misshaped / "movq.safetensors"))
    result = run_sjd("generate", "--model", misshaped, "--prompt", "a fox", "--output", tmp_path / "b.png")
    assert result.returncode == 2
    assert "decoder.time_conv.1.conv.conv.weight" in result.stderr and "[4, 4, 3, 3, 3]" in result.stderr


def test_exporter_reads_transformers_vq_folders_too(bundle, release, tmp_path):
    """An Emu3VQVAE save_pretrained folder exports to the same movq.safetensors as the release layout."""
    hf_vq = tmp_path / "Emu3VQVAE"
    release.vq.save_pretrained(str(hf_vq))
    out = tmp_path / "bundle"
    result = export(release.hf_dir, hf_vq, out)
    assert result.returncode == 0, result.stderr
    assert "renamed from transformers' Emu3VQVAE names" in result.stdout
    converted, released = load_file(str(out / "movq.safetensors")), load_file(str(bundle / "movq.safetensors"))
    assert sorted(converted) == sorted(released)
    for name in released:
        assert torch.equal(converted[name], released[name]), name


def test_exporter_errors_name_the_file(release, tmp_path):
    broken = tmp_path / "Emu3-Gen"
    broken.mkdir()
    for file in release.hf_dir.iterdir():  # shards linked, the small files copied to be edited
        if file.suffix == ".safetensors":
            (broken / file.name).symlink_to(file)
        else:
            shutil.copyfile(file, broken / file.name)
    config = json.loads((broken / "config.json").read_text())
    config["eol_token_id"] = 151845
    (broken / "config.json").write_text(json.dumps(config))
    result = export(broken, release.vq_dir, tmp_path / "out")
    assert result.returncode == 2
    assert "config.json: eol_token_id is 151845" in result.stderr and "151846" in result.stderr
    config["eol_token_id"] = 151846
    config["model_type"] = "llama"  # another model's folder
    (broken / "config.json").write_text(json.dumps(config))
    result = export(broken, release.vq_dir, tmp_path / "out")
    assert result.returncode == 2 and "model_type 'llama' is not Emu3-Gen's" in result.stderr
    config["model_type"] = "Emu3"
    (broken / "config.json").write_text(json.dumps(config))
    # Two visual tokens swapped between the first and the last: their codes would have been swapped too.
    lines = (broken / "emu3_vision_tokens.txt").read_text().splitlines()
    five, six = lines.index(VISUAL.format(5)), lines.index(VISUAL.format(6))
    lines[five], lines[six] = lines[six], lines[five]
    (broken / "emu3_vision_tokens.txt").write_text("\n".join(lines) + "\n")
    result = export(broken, release.vq_dir, tmp_path / "out")
    assert result.returncode == 2 and VISUAL.format(5) in result.stderr and "consecutive ids" in result.stderr
    result = export(release.hf_dir, release.vq_dir, tmp_path / "negative", "--resolution", "-64")
    assert result.returncode == 2 and "--resolution -64" in result.stderr
    (broken / "emu3_vision_tokens.txt").unlink()
    result = export(broken, release.vq_dir, tmp_path / "out")
    assert result.returncode == 2 and "emu3_vision_tokens.txt" in result.stderr
