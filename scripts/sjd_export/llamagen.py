"""export_bundle.py llamagen: LlamaGen T2I (GPT + VQ-16 + FLAN-T5-XL) -> an sjd bundle.

Inputs (docs/models.md, "LlamaGen", lists the downloads):
  --gpt-ckpt    t2i_XL_stage1_256.pt (256 px) or t2i_XL_stage2_512.pt (512 px) from
                peizesun/llamagen_t2i: a torch pickle with the state dict under "model"
                ("module" / "state_dict" accepted too), possibly beside training
                objects such as an argparse.Namespace (so it is unpickled in full, once, here).
  --vq-ckpt     vq_ds16_t2i.pt from the same place (state dict under "model").
  --t5-dir      google/flan-t5-xl as downloaded: config.json, spiece.model and the weights
                (model.safetensors[.index.json] or pytorch_model.bin[.index.json]).
  --image-size  256 or 512 (default: the checkpoint's own args.image_size if it records
                one, else 256). A bundle serves exactly this size.
Writes into --out: gpt.safetensors (every tensor of the GPT state dict, dtype as stored),
vq16.safetensors (quantize.embedding.weight, post_quant_conv.*, decoder.*),
t5_encoder.safetensors (shared.weight and encoder.*, float32; the T5 decoder is left out),
spiece.model, bundle.json.
"""
import argparse
import re
from pathlib import Path

import torch

from .common import (as_float, as_int, copy_into_bundle, matrix_shape, need_int, read_json, reading, save_safetensors,
                     write_json_atomic)

# LlamaGen's GPT configurations (autoregressive/models/gpt.py): name -> (layers, heads, dim).
GPT_MODELS = {
    "GPT-B": (12, 12, 768), "GPT-L": (24, 16, 1024), "GPT-XL": (36, 20, 1280), "GPT-XXL": (48, 24, 1536),
    "GPT-XXXL": (48, 40, 2560), "GPT-1B": (22, 32, 2048), "GPT-3B": (24, 32, 3200), "GPT-7B": (32, 32, 4096),
}
NORM_EPS = 1e-5      # ModelArgs.norm_eps
ROPE_BASE = 10000.0  # ModelArgs.rope_base
# sample_t2i.py's defaults: cfg 7.5, top-k 1000, top-p 1.0 (off), temperature 1.0.
DEFAULTS = {"cfg": 7.5, "temperature": 1.0, "top_k": 1000, "method": "ar"}
VQ_PREFIXES = ("decoder.", "post_quant_conv.", "quantize.embedding.weight")
GPT_REQUIRED = ("tok_embeddings.weight", "output.weight", "norm.weight", "cls_embedding.cap_proj.fc1.weight",
                "cls_embedding.cap_proj.fc2.weight", "cls_embedding.uncond_embedding",
                "layers.0.attention.wqkv.weight", "layers.0.feed_forward.w1.weight")


def add_parser(subparsers):
    parser = subparsers.add_parser("llamagen", help="LlamaGen T2I XL (.pt pickles + VQ-16 + FLAN-T5-XL)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpt-ckpt", required=True, type=Path, help="t2i_XL_stage1_256.pt or t2i_XL_stage2_512.pt")
    parser.add_argument("--vq-ckpt", required=True, type=Path, help="vq_ds16_t2i.pt")
    parser.add_argument("--t5-dir", required=True, type=Path, help="the google/flan-t5-xl folder")
    parser.add_argument("--out", required=True, type=Path, help="bundle folder to write")
    parser.add_argument("--image-size", type=int, choices=[256, 512], default=None,
                        help="image side in pixels (default: the checkpoint's args.image_size, else 256)")
    parser.add_argument("--gpt-model", choices=sorted(GPT_MODELS), default=None,
                        help="LlamaGen GPT configuration, for the head count (default: the checkpoint's "
                             "args.gpt_model, else GPT-XL)")
    parser.add_argument("--num-heads", type=int, default=None, help="attention heads (overrides --gpt-model)")
    parser.add_argument("--name", default=None, help="bundle name (default llamagen-t2i-<size>)")
    parser.set_defaults(run=run)


# --------------------------------------------------------------------------- GPT


def load_training_pickle(path):
    """(state dict, training args or None) of a LlamaGen .pt file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    # Training pickles may hold an argparse.Namespace (and optimizer state): a full unpickle,
    # memory-mapped so that the optimizer's tensors are never read.
    with reading(path):
        checkpoint = torch.load(str(path), map_location="cpu", weights_only=False, mmap=True)
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path}: expected a dict holding the state dict, found {type(checkpoint).__name__}")
    for key in ("model", "module", "state_dict"):
        if isinstance(checkpoint.get(key), dict):
            state = {k: v for k, v in checkpoint[key].items() if isinstance(v, torch.Tensor)}
            return state, checkpoint.get("args")
    raise ValueError(f"{path}: no state dict under \"model\", \"module\" or \"state_dict\"")


def need(state, key, where):
    if key not in state:
        raise KeyError(f"{where}: tensor '{key}' is missing")
    return state[key]


def gpt_section(state, args, options, where):
    for key in GPT_REQUIRED:
        need(state, key, where)
    vocab_size, hidden = matrix_shape(state, "tok_embeddings.weight", where)
    layers = 1 + max(int(m.group(1)) for m in (re.match(r"layers\.(\d+)\.", k) for k in state) if m)
    wqkv_rows = state["layers.0.attention.wqkv.weight"].shape[0]
    if wqkv_rows != 3 * hidden:
        raise ValueError(f"{where}: layers.0.attention.wqkv.weight has {wqkv_rows} rows, expected 3 x {hidden} "
                         "(LlamaGen's T2I models have as many k/v heads as q heads)")
    model_name = options.gpt_model or getattr(args, "gpt_model", None) or "GPT-XL"
    if options.num_heads is not None:
        heads = options.num_heads
    else:
        if model_name not in GPT_MODELS:
            raise ValueError(f"{where}: unknown gpt_model {model_name!r}; pass --num-heads")
        _, heads, dim = GPT_MODELS[model_name]
        if dim != hidden:
            raise ValueError(f"{where}: hidden size {hidden} is not {model_name}'s {dim}; "
                             "pass --gpt-model or --num-heads")
    if heads <= 0 or hidden % heads != 0:
        raise ValueError(f"{where}: {heads} heads do not divide the hidden size {hidden}")
    caption_length, caption_dim = matrix_shape(state, "cls_embedding.uncond_embedding", where)
    return {
        "vocab_size": int(vocab_size),
        "hidden_size": int(hidden),
        "num_layers": int(layers),
        "num_heads": int(heads),
        "num_kv_heads": int(heads),
        "head_dim": int(hidden // heads),
        "intermediate_size": int(state["layers.0.feed_forward.w1.weight"].shape[0]),
        "norm_eps": NORM_EPS,
        "rope": "2d",
        "rope_theta": ROPE_BASE,
        "qk_norm": False,
        "key_style": "llamagen",
        "caption_length": int(caption_length),
    }, int(caption_dim)


# --------------------------------------------------------------------------- VQ-16


def vq_section(state, where):
    tensors = {k: v for k, v in state.items() if k.startswith(VQ_PREFIXES)}
    codebook_size, embed_dim = matrix_shape(tensors, "quantize.embedding.weight", where)
    z_channels = need(tensors, "post_quant_conv.weight", where).shape[0]
    levels = len({m.group(1) for m in (re.match(r"decoder\.conv_blocks\.(\d+)\.", k) for k in tensors) if m})
    if levels == 0:
        raise KeyError(f"{where}: no decoder.conv_blocks.* tensors (is this LlamaGen's VQ-16?)")
    widths = [need(tensors, f"decoder.conv_blocks.{i}.res.0.conv1.weight", where).shape[0] for i in range(levels)]
    ch = widths[-1]  # the full-resolution width: ch * ch_mult[0], and LlamaGen's ch_mult[0] is 1
    if any(w % ch for w in widths):
        raise ValueError(f"{where}: block widths {widths} are not multiples of the last one ({ch})")
    res_pattern = re.compile(r"decoder\.conv_blocks\.0\.res\.(\d+)\.")
    res_blocks = len({m.group(1) for m in map(res_pattern.match, tensors) if m})
    section = {
        "kind": "vq16",
        "weights": ["vq16.safetensors"],
        "codebook_size": int(codebook_size),
        "embed_dim": int(embed_dim),
        "z_channels": int(z_channels),
        "ch": int(ch),
        "ch_mult": [int(w // ch) for w in reversed(widths)],  # conv_blocks run from the lowest resolution up
        "num_res_blocks": res_blocks - 1,
        "attn_resolutions": [],
        "out_channels": int(need(tensors, "decoder.conv_out.weight", where).shape[0]),
        "downsample": 2 ** (levels - 1),
        "codebook_l2_norm": True,  # VQ ModelArgs.codebook_l2_norm, not overridden by sample_t2i.py
    }
    return section, tensors


# --------------------------------------------------------------------------- FLAN-T5


def t5_section(config, where):
    if config.get("model_type") != "t5":
        raise ValueError(f"{where}: model_type is {config.get('model_type')!r}, expected \"t5\"")
    proj = config.get("feed_forward_proj", "relu")
    if proj != "gated-gelu":
        raise ValueError(f"{where}: feed_forward_proj is {proj!r}; only \"gated-gelu\" (FLAN-T5, T5 v1.1) is supported")
    section = {"kind": "t5-encoder", "weights": ["t5_encoder.safetensors"]}
    for key in ("vocab_size", "d_model", "num_layers", "num_heads", "d_kv", "d_ff"):
        section[key] = need_int(config, key, where)
    for key, default in (("relative_attention_num_buckets", 32), ("relative_attention_max_distance", 128)):
        section[key] = as_int(config.get(key, default), key, where)
    section["layer_norm_epsilon"] = as_float(config.get("layer_norm_epsilon", 1e-6), "layer_norm_epsilon", where)
    section["feed_forward_proj"] = proj
    return section


def wanted_t5_tensor(name):
    return name == "shared.weight" or (name.startswith("encoder.") and name != "encoder.embed_tokens.weight")


def t5_encoder_tensors(t5_dir):
    """shared.weight and encoder.* of a HF T5 folder, read shard by shard (the decoder is never loaded)."""
    t5_dir = Path(t5_dir)
    if (t5_dir / "model.safetensors.index.json").is_file() or (t5_dir / "model.safetensors").is_file():
        from safetensors import safe_open

        def open_shard(path, names):
            with reading(path), safe_open(str(path), framework="pt") as shard:
                return {n: shard.get_tensor(n) for n in (names if names is not None else shard.keys())}
        index, single = "model.safetensors.index.json", "model.safetensors"
    elif (t5_dir / "pytorch_model.bin.index.json").is_file() or (t5_dir / "pytorch_model.bin").is_file():
        def open_shard(path, names):
            with reading(path):
                state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
            return {n: state[n] for n in (names if names is not None else state.keys())}
        index, single = "pytorch_model.bin.index.json", "pytorch_model.bin"
    else:
        raise FileNotFoundError(f"{t5_dir}: no model.safetensors[.index.json] or pytorch_model.bin[.index.json]")

    tensors = {}
    if (t5_dir / index).is_file():
        weight_map = read_json(t5_dir / index).get("weight_map", {})
        by_shard = {}
        for name, shard in weight_map.items():
            if wanted_t5_tensor(name) or name == "encoder.embed_tokens.weight":
                by_shard.setdefault(shard, []).append(name)
        for shard, names in sorted(by_shard.items()):
            tensors.update(open_shard(t5_dir / shard, names))
    else:
        tensors = open_shard(t5_dir / single, None)
    if "shared.weight" not in tensors and "encoder.embed_tokens.weight" in tensors:
        tensors["shared.weight"] = tensors["encoder.embed_tokens.weight"]  # tied in T5; some files keep only this name
    out = {k: v.to(torch.float32).contiguous() for k, v in tensors.items() if wanted_t5_tensor(k)}
    if "shared.weight" not in out:
        raise KeyError(f"{t5_dir}: tensor 'shared.weight' (or encoder.embed_tokens.weight) is missing")
    return out


# --------------------------------------------------------------------------- bundle


def run(options, staged):
    """Writes the bundle into `staged` (common.StagedBundle); returns the report's (file, what) lines."""
    gpt_state, gpt_args = load_training_pickle(options.gpt_ckpt)
    image_size = options.image_size or getattr(gpt_args, "image_size", None) or 256
    if image_size not in (256, 512):
        raise ValueError(f"{options.gpt_ckpt}: image size {image_size} is not 256 or 512 (pass --image-size)")
    transformer, caption_dim = gpt_section(gpt_state, gpt_args, options, str(options.gpt_ckpt))

    vq, vq_tensors = vq_section(load_training_pickle(options.vq_ckpt)[0], str(options.vq_ckpt))
    if vq["codebook_size"] != transformer["vocab_size"]:
        raise ValueError(f"{options.vq_ckpt}: codebook of {vq['codebook_size']} codes, but the GPT's vocabulary "
                         f"has {transformer['vocab_size']} tokens")
    if image_size % vq["downsample"]:
        raise ValueError(f"image size {image_size} is not a multiple of the VQ's {vq['downsample']} pixels per code")
    grid = image_size // vq["downsample"]
    transformer["grid_width"] = grid

    t5_dir = Path(options.t5_dir)
    text_encoder = t5_section(read_json(t5_dir / "config.json"), str(t5_dir / "config.json"))
    if text_encoder["d_model"] != caption_dim:
        raise ValueError(f"{t5_dir}: d_model {text_encoder['d_model']} differs from the GPT's caption width "
                         f"{caption_dim} (cls_embedding.uncond_embedding)")
    spiece = t5_dir / "spiece.model"
    if not spiece.is_file():
        raise FileNotFoundError(f"{spiece}: not found")
    t5_tensors = t5_encoder_tensors(t5_dir)

    save_safetensors(staged.stage / "gpt.safetensors", gpt_state)
    save_safetensors(staged.stage / "vq16.safetensors", vq_tensors)
    save_safetensors(staged.stage / "t5_encoder.safetensors", t5_tensors)
    copy_into_bundle(spiece, staged, "spiece.model")
    transformer = {"weights": ["gpt.safetensors"], **transformer}
    bundle = {
        "format": "sjd-bundle",
        "version": 1,
        "name": options.name or f"llamagen-t2i-{image_size}",
        "family": "llamagen",
        "transformer": transformer,
        "layout": {"kind": "llamagen", "grid_height": grid, "grid_width": grid, "image_token_first": 0,
                   "codebook_size": vq["codebook_size"]},
        "text_encoder": text_encoder,
        "tokenizer": {"kind": "spm", "file": "spiece.model"},
        "vq": vq,
        "defaults": DEFAULTS,
    }
    write_json_atomic(staged.stage / "bundle.json", bundle)
    return [
        ("gpt.safetensors", f"{len(gpt_state)} GPT tensors ({transformer['num_layers']} layers, hidden "
                            f"{transformer['hidden_size']}, {transformer['num_heads']} heads), as stored"),
        ("vq16.safetensors", f"{len(vq_tensors)} VQ-16 decoder tensors (codebook {vq['codebook_size']} x "
                             f"{vq['embed_dim']}, {vq['downsample']} px per code)"),
        ("t5_encoder.safetensors", f"{len(t5_tensors)} FLAN-T5 encoder tensors, float32"),
        ("spiece.model", "the T5 SentencePiece model"),
        ("bundle.json", f"{grid}x{grid} codes -> {image_size} px; caption {transformer['caption_length']} slots; "
                        f"defaults {DEFAULTS}"),
    ]
