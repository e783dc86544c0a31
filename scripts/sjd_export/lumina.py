"""export_bundle.py lumina-mgpt: a Hugging Face Lumina-mGPT folder + Meta's VQGAN -> an sjd bundle.

Inputs (docs/models.md, "Lumina-mGPT", lists the downloads):
  --hf-dir       Alpha-VLLM/Lumina-mGPT-7B-768 as downloaded: config.json (with the whole
                 `vocabulary_map`), model.safetensors.index.json + its shards, tokenizer.json.
  --vqgan-ckpt   Meta's Chameleon `vqgan.ckpt` (a torch pickle, tensors under "state_dict").
  --vqgan-yaml   its `vqgan.yaml` (taming config: embed_dim, n_embed, ddconfig).
The transformer shards are used in place (bundle.json names the index file, relative to
--out); tokenizer.json is copied; the VQGAN's decoder side is converted to vqgan.safetensors.

Every id of the generated sequence is read from the release's vocabulary, never assumed:
BOS, begin/end of image (<racm3:break>, <eoss>), the row end <reserved08799>, the end of
turn <reserved08706>, the size tokens <reserved{8800 + pixels/32}> and the image tokens
(IMGIMG<letters>Z, letters A..J = digits 0..9 of the codebook index).
"""
import argparse
import math
import os
import re
from pathlib import Path

import torch

from .common import (as_float, as_int, check_vq_shapes, copy_into_bundle, link_release_weights, need, need_int,
                     int_list, optional_int, read_json, read_release_index, reading, rope_theta,
                     save_safetensors, write_json_atomic)

RESOLUTIONS = [512, 768, 1024]  # the 7B releases; --resolutions names others (the default model's 64)
SIZE_TOKEN_UNIT_PX = 32  # <reserved{8800 + n}> with n = pixels / 32 (Lumina's patch_size)
PROMPT_TEMPLATE = "Generate an image of {width}x{height} according to the following prompt:\n{prompt}"
BEGIN_IMAGE, END_IMAGE = "<racm3:break>", "<eoss>"
NEWLINE, END_OF_TURN = "<reserved08799>", "<reserved08706>"
QK_NORM_EPS = 1e-5  # Chameleon's per-head LayerNorm uses a fixed eps of 1e-5
VQ_TENSOR_PREFIXES = ("decoder.", "post_quant_conv.", "quantize.embedding.weight")
HF_VQ_PREFIX = "model.vqmodel."
# Generation settings of the papers' evaluations (top-2000, temperature 1, CFG 3; the
# README's example uses CFG 4.0): configs/lumina_mgpt_7b_768.json says the same.
DEFAULTS = {"cfg": 3.0, "temperature": 1.0, "top_k": 2000, "method": "ar"}


def size_token(pixels):
    return f"<reserved{8800 + pixels // SIZE_TOKEN_UNIT_PX:05d}>"


# --------------------------------------------------------------------------- transformer


def transformer_section(config, weights, where):
    if config.get("model_type") != "chameleon":
        raise ValueError(f"{where}: model_type is {config.get('model_type')!r}, expected \"chameleon\"")
    for flag in ("swin_norm", "attention_bias", "mlp_bias", "tie_word_embeddings"):
        if config.get(flag):
            raise ValueError(f"{where}: {flag} = true is not supported (Lumina-mGPT 7B has it false)")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act {config['hidden_act']!r} is not supported (only silu)")
    hidden = need_int(config, "hidden_size", where)
    heads = need_int(config, "num_attention_heads", where)
    kv_heads = optional_int(config, "num_key_value_heads", where, heads)
    # qk-norm weights are [model_parallel_size, head_dim], repeated over the heads of
    # each training shard: sjd broadcasts [1, D] (Lumina 7B) or [heads, D] (HF chameleon-7b).
    parallel = optional_int(config, "model_parallel_size", where, 1)
    if parallel not in (1, heads):
        raise ValueError(f"{where}: model_parallel_size {parallel}: q/k-norm weights of shape [{parallel}, head_dim] "
                         f"are not supported (only 1 or num_attention_heads = {heads})")
    return {
        "weights": [weights],
        "vocab_size": need_int(config, "vocab_size", where),
        "hidden_size": hidden,
        "num_layers": need_int(config, "num_hidden_layers", where),
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": hidden // heads,  # as Chameleon computes it
        "intermediate_size": need_int(config, "intermediate_size", where),
        "norm_eps": as_float(config.get("rms_norm_eps", 1e-5), "rms_norm_eps", where),
        "rope": "1d",
        "rope_theta": rope_theta(config, where),
        "qk_norm": True,
        "qk_norm_eps": QK_NORM_EPS,
        "key_style": "hf",
    }


# --------------------------------------------------------------------------- vocabulary


def tokenizer_vocabulary(tokenizer_file):
    """Token -> id of a tokenizer.json: the BPE vocab plus its added tokens."""
    data = read_json(tokenizer_file)
    model = need(data, "model", str(tokenizer_file))
    if model.get("type") != "BPE":
        raise ValueError(f"{tokenizer_file}: model.type is {model.get('type')!r}, expected \"BPE\"")
    vocab = need(model, "vocab", f"{tokenizer_file}: model")
    if not isinstance(vocab, dict):
        raise ValueError(f"{tokenizer_file}: model.vocab is not an object of token -> id")
    vocab = dict(vocab)
    for i, token in enumerate(data.get("added_tokens", [])):
        where = f"{tokenizer_file}: added_tokens[{i}]"
        vocab[need(token, "content", where)] = as_int(need(token, "id", where), "id", where, minimum=0)
    return vocab


def bos_token(hf_dir):
    """The BOS the reference prepends (its tokenizer's bos_token; "<s>" when unstated)."""
    path = Path(hf_dir) / "tokenizer_config.json"
    token = read_json(path).get("bos_token") if path.is_file() else None
    if isinstance(token, dict):
        token = token.get("content")
    return token or "<s>"


def image_token_table(vocabulary_map, where):
    """Codebook index -> token id, parsed from the IMGIMG<letters>Z names."""
    table = {}
    for name, token_id in vocabulary_map.items():
        if not name.startswith("IMGIMG"):
            continue
        match = re.fullmatch(r"IMGIMG([A-J]+)Z", name)
        if not match:
            raise ValueError(f"{where}: vocabulary_map: image token name {name!r} is not IMGIMG<letters A..J>Z")
        index = int("".join(str(ord(c) - ord("A")) for c in match.group(1)))
        if index in table:
            raise ValueError(f"{where}: vocabulary_map: codebook index {index} has two tokens ({name!r} and id {table[index]})")
        table[index] = int(token_id)
    if not table:
        raise ValueError(f"{where}: vocabulary_map has no IMGIMG...Z image tokens")
    missing = sorted(set(range(len(table))) - set(table))
    if missing:
        raise ValueError(f"{where}: vocabulary_map: image tokens do not cover codebook indices 0..{len(table) - 1} "
                         f"(first missing: {missing[0]})")
    return [table[i] for i in range(len(table))]


def codebook_order(table, where):
    """(first id, permutation or None). The ids must form one contiguous block; when the
    codebook index is not id - first, `permutation[id - first]` is the index of that id."""
    first = min(table)
    if sorted(table) != list(range(first, first + len(table))):
        raise ValueError(f"{where}: vocabulary_map: image token ids are not one contiguous block "
                         f"({first}..{max(table)} holds {len(table)} tokens)")
    if all(token_id == first + index for index, token_id in enumerate(table)):
        return first, None
    permutation = [0] * len(table)
    for index, token_id in enumerate(table):
        permutation[token_id - first] = index
    return first, permutation


def resolve_layout(vocabulary_map, tokenizer_vocab, bos, resolution, resolutions, downsample, codebook_size, where):
    def token_id(name):
        if name not in vocabulary_map:
            raise KeyError(f"{where}: vocabulary_map has no {name!r}")
        found = int(vocabulary_map[name])
        if tokenizer_vocab.get(name) != found:
            raise ValueError(f"{where}: {name!r} is id {found} in config.json's vocabulary_map but "
                             f"{tokenizer_vocab.get(name)} in the tokenizer")
        return found

    if resolution not in resolutions:
        raise ValueError(f"--resolution {resolution}: not one of --resolutions {resolutions}")
    for pixels in resolutions:
        if pixels <= 0 or pixels % downsample or pixels % SIZE_TOKEN_UNIT_PX:
            raise ValueError(f"--resolutions: {pixels} px is not a multiple of the VQGAN's {downsample}x "
                             f"downsampling and of the {SIZE_TOKEN_UNIT_PX} px size-token unit")
    size_base = token_id(size_token(0))
    for pixels in resolutions:  # the layout computes size ids as base + pixels / 32
        if token_id(size_token(pixels)) != size_base + pixels // SIZE_TOKEN_UNIT_PX:
            raise ValueError(f"{where}: {size_token(pixels)} is not {size_token(0)} + {pixels // SIZE_TOKEN_UNIT_PX}")
    table = image_token_table(vocabulary_map, where)
    if len(table) != codebook_size:
        raise ValueError(f"{where}: {len(table)} image tokens but the VQGAN codebook has {codebook_size} entries")
    first, permutation = codebook_order(table, where)
    grid = resolution // downsample
    layout = {
        "kind": "lumina-mgpt",
        "grid_height": grid,
        "grid_width": grid,
        "image_token_first": first,
        "codebook_size": codebook_size,
        "bos_id": token_id(bos),
        "begin_image_id": token_id(BEGIN_IMAGE),
        "end_image_id": token_id(END_IMAGE),
        "newline_id": token_id(NEWLINE),
        "end_of_turn_id": token_id(END_OF_TURN),
        "size_token_base": size_base,
        "size_token_unit_px": SIZE_TOKEN_UNIT_PX,
        "resolutions": list(resolutions),
        "prompt_template": PROMPT_TEMPLATE,
    }
    return layout, permutation


# --------------------------------------------------------------------------- VQGAN


def vq_section_from_yaml(yaml_file):
    import yaml

    path = Path(yaml_file)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    try:
        text = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{path}: not a YAML file: {getattr(error, 'problem', None) or 'unreadable'}{where}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text: {error}") from None
    params = need(need(text, "model", str(path)), "params", f"{path}: model")
    dd = need(params, "ddconfig", f"{path}: model.params")
    if params.get("remap"):  # the reference's quantizer would map codes through it; sjd reads them as they are
        raise ValueError(f"{path}: model.params.remap is not supported")
    where = f"{path}: model.params.ddconfig"
    for flag in ("give_pre_end", "tanh_out", "use_linear_attn"):
        if dd.get(flag):
            raise ValueError(f"{where}: {flag} = true is not supported")
    if dd.get("attn_type", "vanilla") != "vanilla":
        raise ValueError(f"{where}: attn_type {dd['attn_type']!r} is not supported (only vanilla)")
    at_params = f"{path}: model.params"
    return vq_section(
        codebook_size=(at_params, "n_embed", need(params, "n_embed", at_params)),
        embed_dim=(at_params, "embed_dim", need(params, "embed_dim", at_params)),
        z_channels=(where, "z_channels", need(dd, "z_channels", where)), ch=(where, "ch", need(dd, "ch", where)),
        ch_mult=(where, "ch_mult", need(dd, "ch_mult", where)),
        num_res_blocks=(where, "num_res_blocks", need(dd, "num_res_blocks", where)),
        attn_resolutions=(where, "attn_resolutions", dd.get("attn_resolutions") or []),
        resolution=(where, "resolution", need(dd, "resolution", where)),
        out_channels=(where, "out_ch", dd.get("out_ch", 3)))


def vq_section_from_config(config, where):
    """The VQ architecture from config.json's vq_config (transformers' names)."""
    vq = need(config, "vq_config", where)
    where = f"{where}: vq_config"
    if vq.get("attn_type", "vanilla") != "vanilla":
        raise ValueError(f"{where}: attn_type {vq['attn_type']!r} is not supported (only vanilla)")

    def number(release_key, default=None):
        value = vq.get(release_key, default) if default is not None else need(vq, release_key, where)
        return where, release_key, value

    return vq_section(
        codebook_size=number("num_embeddings"), embed_dim=number("embed_dim"), z_channels=number("latent_channels"),
        ch=number("base_channels"), ch_mult=number("channel_multiplier"), num_res_blocks=number("num_res_blocks"),
        attn_resolutions=(where, "attn_resolutions", vq.get("attn_resolutions") or []),
        resolution=number("resolution"), out_channels=number("out_channels", 3))


def vq_section(**numbers):
    """The bundle's vq section: each keyword is the bundle's key, with (where, the release's key, its value), so that
    a bad value is named as the release names it."""
    section = {"kind": "chameleon-vqgan", "weights": ["vqgan.safetensors"]}
    for key, (where, release_key, value) in numbers.items():
        if key in ("ch_mult", "attn_resolutions"):
            section[key] = int_list(value, release_key, where)
        else:
            section[key] = as_int(value, release_key, where)
    if not section["ch_mult"]:
        where, release_key, _ = numbers["ch_mult"]
        raise ValueError(f"{where}: \"{release_key}\" is empty")
    section["downsample"] = 2 ** (len(section["ch_mult"]) - 1)
    return section


def vq_tensors_from_ckpt(ckpt_file):
    """The decode-side tensors of Meta's vqgan.ckpt (encoder, quant_conv and loss are dropped)."""
    path = Path(ckpt_file)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    with reading(path):
        checkpoint = torch.load(str(path), map_location="cpu", weights_only=False)
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise ValueError(f"{path}: expected a checkpoint dict with a \"state_dict\" (Meta's vqgan.ckpt layout)")
    return {k: v for k, v in checkpoint["state_dict"].items()
            if isinstance(v, torch.Tensor) and k.startswith(VQ_TENSOR_PREFIXES)}


def vq_tensors_from_shards(index_file, weight_map):
    """The decode-side tensors stored under model.vqmodel.* in the transformer shards, if any."""
    from safetensors import safe_open

    wanted = {name: shard for name, shard in weight_map.items()
              if name.startswith(HF_VQ_PREFIX) and name[len(HF_VQ_PREFIX):].startswith(VQ_TENSOR_PREFIXES)}
    tensors = {}
    for shard in sorted(set(wanted.values())):
        path = Path(index_file).parent / shard
        with reading(path), safe_open(str(path), framework="pt") as f:
            for name in (n for n, s in wanted.items() if s == shard):
                tensors[name[len(HF_VQ_PREFIX):]] = f.get_tensor(name)
    return tensors


def check_vq_tensors(tensors, vq, source):
    """The tensors the decoder starts from must be there; sjd checks every shape when it loads."""
    expected = {"quantize.embedding.weight": [vq["codebook_size"], vq["embed_dim"]],
                "post_quant_conv.weight": [vq["z_channels"], vq["embed_dim"], 1, 1],
                "decoder.conv_in.weight": [vq["ch"] * vq["ch_mult"][-1], vq["z_channels"], 3, 3]}
    check_vq_shapes(tensors, expected, source)


# --------------------------------------------------------------------------- export


def run(args, staged):
    """Writes the bundle into `staged` (common.StagedBundle); returns the report's (file, what) lines."""
    if args.top_k < 0 or not args.cfg > 0 or not math.isfinite(args.cfg):
        raise ValueError(f"--top-k {args.top_k} --cfg {args.cfg}: top-k must be >= 0 (0: off) and cfg a finite "
                         "number > 0")
    hf_dir, out = Path(args.hf_dir), staged.out
    config_file = hf_dir / "config.json"
    config = read_json(config_file)
    where = str(config_file)
    index_file, weight_map = read_release_index(hf_dir)
    tokenizer_file = Path(args.tokenizer) if args.tokenizer else hf_dir / "tokenizer.json"
    tokenizer_vocab = tokenizer_vocabulary(tokenizer_file)
    vocabulary_map = need(config, "vocabulary_map", where)
    if not isinstance(vocabulary_map, dict):
        raise ValueError(f"{where}: vocabulary_map is not an object of token -> id")

    if bool(args.vqgan_ckpt) != bool(args.vqgan_yaml):
        raise ValueError("--vqgan-ckpt and --vqgan-yaml go together")
    if args.vqgan_ckpt:
        vq = vq_section_from_yaml(args.vqgan_yaml)
        vq_tensors, vq_source = vq_tensors_from_ckpt(args.vqgan_ckpt), str(args.vqgan_ckpt)
    else:
        # transformers' converter keeps only the encoder side under model.vqmodel
        # ("we dont do image generation yet"), so this works only for checkpoints that kept the decoder.
        vq = vq_section_from_config(config, where)
        vq_tensors, vq_source = vq_tensors_from_shards(index_file, weight_map), f"{index_file} (model.vqmodel.*)"
        if "decoder.conv_in.weight" not in vq_tensors:
            raise ValueError(f"{index_file}: the checkpoint has no VQ decoder (model.vqmodel.decoder.*); "
                             "pass Meta's --vqgan-ckpt and --vqgan-yaml")
    check_vq_tensors(vq_tensors, vq, vq_source)

    layout, permutation = resolve_layout(vocabulary_map, tokenizer_vocab, bos_token(hf_dir), args.resolution,
                                         args.resolutions, vq["downsample"], vq["codebook_size"], where)
    if "max_position_embeddings" in config:  # sjd warns when a prompt and its image run past it
        layout["max_positions"] = as_int(config["max_position_embeddings"], "max_position_embeddings", where)
    vocab_size = need_int(config, "vocab_size", where)
    for key in ("bos_id", "begin_image_id", "end_image_id", "newline_id", "end_of_turn_id"):
        if layout[key] >= vocab_size:
            raise ValueError(f"{where}: {key} {layout[key]} is outside vocab_size {vocab_size}")
    if layout["image_token_first"] + layout["codebook_size"] > vocab_size:
        raise ValueError(f"{where}: image tokens end past vocab_size {vocab_size}")
    codebook = vq_tensors["quantize.embedding.weight"]
    if permutation is not None:  # store codebook rows in token-id order: row (id - first) decodes token id
        vq_tensors["quantize.embedding.weight"] = codebook[torch.tensor(permutation)]

    transformer = transformer_section(config, index_file.name, where)  # refused before anything is written
    # Exported into the release folder itself, a --tokenizer of another file must not replace the release's own
    # tokenizer.json (transformers reads it), so the bundle's copy gets a name of its own.
    tokenizer_name = "tokenizer.json"
    if out.resolve() == hf_dir.resolve() and tokenizer_file.resolve() != (hf_dir / tokenizer_name).resolve():
        tokenizer_name = "sjd_tokenizer.json"
    save_safetensors(staged.stage / "vqgan.safetensors", {k: v.float() for k, v in vq_tensors.items()})
    copy_into_bundle(tokenizer_file, staged, tokenizer_name)
    weights = link_release_weights(index_file, weight_map, staged)
    bundle = {
        "format": "sjd-bundle",
        "version": 1,
        "name": args.name or hf_dir.resolve().name,
        "family": "lumina-mgpt",
        "transformer": transformer,
        "layout": layout,
        "tokenizer": {"kind": "bpe", "file": tokenizer_name},
        "vq": vq,
        "defaults": dict(DEFAULTS, top_k=args.top_k, cfg=args.cfg),
        "source": {"exporter": "lumina-mgpt", "hf_dir": os.path.relpath(hf_dir.resolve(), out.resolve()),
                   "vq_weights": vq_source,
                   "codebook_rows": "permuted to token-id order" if permutation else "as released"},
    }
    write_json_atomic(staged.stage / "bundle.json", bundle)
    grid = layout["grid_height"]
    return [
        ("bundle.json", f"lumina-mgpt, {grid}x{grid} codes -> {args.resolution} px, "
                        f"{3 + grid * (grid + 1) + 2} generated tokens; transformer weights {weights}"),
        (tokenizer_name, f"copied from {tokenizer_file}"),
        ("vqgan.safetensors", f"{len(vq_tensors)} decoder-side tensors (float32) from {vq_source}"
                              + ("; codebook rows permuted to token-id order" if permutation else "")),
    ]


def resolution_list(text):
    try:
        return [int(side) for side in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of pixel sizes") from None


def add_parser(subparsers):
    p = subparsers.add_parser("lumina-mgpt", help="Lumina-mGPT (HF folder + Meta's vqgan.ckpt/yaml)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hf-dir", required=True, help="the Hugging Face Lumina-mGPT folder (config.json, shards, index)")
    p.add_argument("--vqgan-ckpt", help="Meta's Chameleon vqgan.ckpt (needed unless the shards hold model.vqmodel.decoder.*)")
    p.add_argument("--vqgan-yaml", help="Meta's vqgan.yaml, with --vqgan-ckpt")
    p.add_argument("--tokenizer", help="tokenizer.json to use (default: HF-DIR/tokenizer.json)")
    p.add_argument("--out", required=True, help="bundle folder to write (may be HF-DIR itself)")
    p.add_argument("--resolutions", type=resolution_list, default=RESOLUTIONS,
                   help="comma-separated image sides the bundle accepts (default: the 7B releases' 512,768,1024)")
    p.add_argument("--resolution", type=int, default=768, help="default image side (pixels), one of --resolutions")
    p.add_argument("--top-k", type=int, default=DEFAULTS["top_k"],
                   help="default top-k written to the bundle (Lumina-mGPT: 2000 of its 8192 codes)")
    p.add_argument("--cfg", type=float, default=DEFAULTS["cfg"],
                   help="default classifier-free guidance scale written to the bundle (Lumina-mGPT: 3.0)")
    p.add_argument("--name", help="bundle name (default: the HF folder's name)")
    p.set_defaults(run=run)
