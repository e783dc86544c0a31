"""export_bundle.py emu3: BAAI Emu3-Gen + Emu3-VisionTokenizer -> an sjd bundle.

Inputs (docs/models.md, "Emu3", lists the downloads):
  --hf-dir                BAAI/Emu3-Gen as downloaded: config.json, model.safetensors.index.json + its
                          shards, emu3.tiktoken, emu3_vision_tokens.txt, tokenizer_config.json.
  --vision-tokenizer-dir  BAAI/Emu3-VisionTokenizer: config.json + model.safetensors (the release's
                          Emu3VisionVQModel names), or a transformers Emu3VQVAE save_pretrained folder.
The transformer shards are used in place (bundle.json names the index file, relative to --out);
emu3.tiktoken is copied; the MoVQ decoder side is written to movq.safetensors (float32) in the
release's tensor names, converted from transformers' names when needed.

Every id is computed as Emu3's tokenizer (tokenization_emu3.py) computes it: ranks from
emu3.tiktoken, then special tokens numbered from 151643 in the order <|endoftext|>,
<|im_start|>, <|im_end|>, <|extra_0|>..<|extra_204|>, then the lines of emu3_vision_tokens.txt.
The bundle's tokenizer gets that whole table; its layout names the tokens it uses.
"""
import argparse
from pathlib import Path

from .common import (as_float, as_int, check_vq_shapes, copy_into_bundle, int_list, link_release_weights, need,
                     need_int, optional_int, read_json, read_release_index, reading, rope_theta,
                     save_safetensors, write_json_atomic)

SPECIAL_START_ID = 151643  # tokenization_emu3.py: specials are numbered from here whatever the file holds
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
# Emu3Tokenizer's constructor defaults; tokenizer_config.json may restate them.
TOKEN_DEFAULTS = {
    "bos_token": "<|extra_203|>", "eos_token": "<|extra_204|>", "img_token": "<|image token|>",
    "boi_token": "<|image start|>", "eoi_token": "<|image end|>", "eol_token": "<|extra_200|>",
    "eof_token": "<|extra_201|>",
}
# Emu3Processor's visual_template and prefix_template.
VISUAL_TOKEN = "<|visual token {:06d}|>"
SIZE_TEMPLATE = "{H}*{W}"
# baaivision/Emu3 image_generation.py: appended to the prompt / the unconditional row's text.
POSITIVE_PROMPT = " masterpiece, film grained, best quality."
NEGATIVE_PROMPT = ("lowres, bad anatomy, bad hands, text, error, missing fingers, extra digit, fewer digits, "
                   "cropped, worst quality, low quality, normal quality, jpeg artifacts, signature, watermark, "
                   "username, blurry.")
DEFAULT_IMAGE_AREA = 720 * 720  # Emu3Config.image_area / the processor's default
DEFAULT_MAX_POSITIONS = 9216
# image_generation.py: classifier_free_guidance 3.0, top_k 2048, sampling at temperature 1.
DEFAULTS = {"cfg": 3.0, "temperature": 1.0, "top_k": 2048, "method": "ar"}
# config.json's id fields, checked against the ids the tokenizer files give.
CONFIG_ID_FIELDS = {"bos_token_id": "bos_token", "eos_token_id": "eos_token", "img_token_id": "img_token",
                    "boi_token_id": "boi_token", "eoi_token_id": "eoi_token", "eol_token_id": "eol_token",
                    "eof_token_id": "eof_token"}
VQ_TENSOR_PREFIXES = ("decoder.", "post_quant_conv.", "quantize.embedding.weight")


# --------------------------------------------------------------------------- transformer


def transformer_section(config, weights, where):
    if config.get("model_type") == "emu3":
        raise ValueError(f"{where}: this is transformers' converted Emu3ForConditionalGeneration (keys "
                         "model.text_model.*); export the original BAAI/Emu3-Gen folder instead")
    if config.get("model_type") != "Emu3":  # another model's folder passed by mistake
        raise ValueError(f"{where}: model_type {config.get('model_type')!r} is not Emu3-Gen's \"Emu3\"")
    for flag in ("attention_bias", "mlp_bias", "tie_word_embeddings"):
        if config.get(flag):
            raise ValueError(f"{where}: {flag} = true is not supported (Emu3-Gen has it false)")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act {config['hidden_act']!r} is not supported (only silu)")
    hidden = need_int(config, "hidden_size", where)
    heads = need_int(config, "num_attention_heads", where)
    return {
        "weights": [weights],
        "vocab_size": need_int(config, "vocab_size", where),
        "hidden_size": hidden,
        "num_layers": need_int(config, "num_hidden_layers", where),
        "num_heads": heads,
        "num_kv_heads": optional_int(config, "num_key_value_heads", where, heads),
        "head_dim": optional_int(config, "head_dim", where, hidden // heads),
        "intermediate_size": need_int(config, "intermediate_size", where),
        "norm_eps": as_float(config.get("rms_norm_eps", 1e-5), "rms_norm_eps", where),
        "rope": "1d",
        "rope_theta": rope_theta(config, where),
        "qk_norm": False,
        "key_style": "hf",
    }


# --------------------------------------------------------------------------- tokenizer


def tiktoken_ranks(path):
    """Rank count and largest rank of an emu3.tiktoken file (`base64 rank` lines)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    ranks = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise ValueError(f"{path}:{number}: expected \"<base64 token> <rank>\"")
        ranks.append(int(parts[1]))
    if not ranks:
        raise ValueError(f"{path}: no tokens")
    return len(ranks), max(ranks)


def special_table(vision_tokens_file, tiktoken_file):
    """Special token -> id exactly as Emu3Tokenizer numbers them."""
    path = Path(vision_tokens_file)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    with reading(path):
        text = path.read_text(encoding="utf-8")
    vision = [line.strip() for line in text.splitlines() if line.strip()]
    names = QWEN_SPECIALS + vision
    table = {}
    for offset, name in enumerate(names):
        if name in table:
            raise ValueError(f"{path}: special token {name!r} is listed twice")
        table[name] = SPECIAL_START_ID + offset
    _, largest_rank = tiktoken_ranks(tiktoken_file)
    if largest_rank >= SPECIAL_START_ID:
        raise ValueError(f"{tiktoken_file}: rank {largest_rank} collides with the special tokens numbered from "
                         f"{SPECIAL_START_ID}")
    return table


def token_names(hf_dir):
    """The special tokens Emu3's processor uses, from tokenizer_config.json where it states them."""
    path = Path(hf_dir) / "tokenizer_config.json"
    config = read_json(path) if path.is_file() else {}
    names = {}
    for key, default in TOKEN_DEFAULTS.items():
        value = config.get(key) or default
        names[key] = value.get("content") if isinstance(value, dict) else value
    return names


def layout_section(names, specials, image_area, max_positions, codebook_size, downsample, where):
    def known(name):
        if name not in specials:
            raise KeyError(f"{where}: special token {name!r} is not in the tokenizer's special tokens")
        return name

    first, last = VISUAL_TOKEN.format(0), VISUAL_TOKEN.format(codebook_size - 1)
    # sjd reads code (id - the first visual token's id), where the reference parses the number in the token's
    # name: every visual token must sit at its number's place, not only the first and the last.
    start = specials[known(first)]
    for code in range(codebook_size):
        name = VISUAL_TOKEN.format(code)
        if specials.get(name) != start + code:
            raise ValueError(f"{where}: visual token {name} has id {specials.get(name)}, not {start + code}: the "
                             f"{codebook_size} visual tokens must be consecutive ids in the order of their numbers")
    side = round(image_area ** 0.5 / downsample)  # Emu3Processor.calculate_generate_size for ratio 1:1
    if side * (side + 1) + 3 > max_positions:
        raise ValueError(f"image side {side * downsample}: {side * (side + 1) + 3} generated tokens exceed the model's "
                         f"{max_positions} positions")
    return {
        "kind": "emu3",
        "image_area": int(image_area),
        "max_positions": int(max_positions),
        "codebook_size": int(codebook_size),
        "tokens": {
            "bos": known(names["bos_token"]), "eos": known(names["eos_token"]),
            "image_start": known(names["boi_token"]), "image_end": known(names["eoi_token"]),
            "image_token": known(names["img_token"]), "eol": known(names["eol_token"]),
            "eof": known(names["eof_token"]), "visual_first": first, "visual_last": last,
        },
        "positive_prompt": POSITIVE_PROMPT,
        "negative_prompt": NEGATIVE_PROMPT,
        "size_template": SIZE_TEMPLATE,
    }


# --------------------------------------------------------------------------- MoVQ


def vq_section(config, where):
    """The decoder numbers from either config flavour (release Emu3VisionVQConfig or transformers Emu3VQVAEConfig)."""
    hf = config.get("model_type") == "emu3_vqgan"
    key = (lambda release, transformers: transformers if hf else release)
    if config.get(key("double_z", "double_latent")):
        raise ValueError(f"{where}: double latents are not supported")
    # The release's MoVQ attention has one head; transformers' config could ask for more, which sjd's decoder
    # (and the release's) does not split.
    if hf and config.get("num_attention_heads", 1) != 1:
        raise ValueError(f"{where}: num_attention_heads {config['num_attention_heads']} is not supported (one head)")
    ch_mult = int_list(need(config, key("ch_mult", "channel_multiplier"), where), key("ch_mult", "channel_multiplier"),
                       where)
    if not ch_mult:
        raise ValueError(f"{where}: {key('ch_mult', 'channel_multiplier')} is empty")
    return {
        "kind": "movq",
        "weights": ["movq.safetensors"],
        "codebook_size": need_int(config, "codebook_size", where),
        "embed_dim": need_int(config, "embed_dim", where),
        "z_channels": need_int(config, key("z_channels", "latent_channels"), where),
        "ch": need_int(config, key("ch", "base_channels"), where),
        "ch_mult": ch_mult,
        "num_res_blocks": need_int(config, "num_res_blocks", where),
        # Emu3's attn_resolutions are level indices, not taming's image sides: sjd calls them attn_levels.
        "attn_resolutions": [],
        "attn_levels": int_list(config.get("attn_resolutions") or [], "attn_resolutions", where, minimum=0),
        "temporal_downsample_factor": need_int(config, "temporal_downsample_factor", where),
        "out_channels": as_int(config.get("out_channels", 3), "out_channels", where),
        "downsample": 2 ** (len(ch_mult) - 1),
    }


def release_name(name):
    """A transformers Emu3VQVAE decoder-side tensor name -> the release's (Emu3VisionVQModel) name.
    transformers regrouped the 2D decoder (mid -> middle_block, up -> up_block.up, attention norms
    beside the attention) and made the attention projections Linear layers."""
    parts = name.split(".")
    if name.startswith("decoder.middle_block."):
        rest = parts[2:]
        if rest[0] == "attn_norm":
            return ".".join(["decoder.mid.attn_1.norm"] + rest[1:])
        if rest[0] == "attn_1":
            return ".".join(["decoder.mid.attn_1", linear_to_conv(rest[1])] + rest[2:])
        return ".".join(["decoder.mid"] + rest)
    if name.startswith("decoder.up_block.up."):
        level, rest = parts[3], parts[4:]
        if rest[0] == "attn_norms":
            return ".".join([f"decoder.up.{level}.attn.{rest[1]}.norm"] + rest[2:])
        if rest[0] == "attn":
            return ".".join([f"decoder.up.{level}.attn.{rest[1]}", linear_to_conv(rest[2])] + rest[3:])
        return ".".join([f"decoder.up.{level}"] + rest)
    return name


def linear_to_conv(projection):
    return {"q_proj": "q", "k_proj": "k", "v_proj": "v", "out_proj": "proj_out"}[projection]


def vq_tensors(vq_dir):
    """Decode-side tensors of the vision tokenizer in the release's names, float32; (tensors, source, converted)."""
    from safetensors.torch import load_file

    files = sorted(Path(vq_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{vq_dir}: no .safetensors file (expected the vision tokenizer's model.safetensors)")
    tensors = {}
    for file in files:
        with reading(file):
            tensors.update(load_file(str(file)))
    converted = any(name.startswith(("decoder.middle_block.", "decoder.up_block.")) for name in tensors)
    out = {}
    for name, tensor in tensors.items():
        if not name.startswith(VQ_TENSOR_PREFIXES) or name.endswith("num_batches_tracked"):
            continue
        target = release_name(name) if converted else name
        if converted and target.rsplit(".", 2)[-2] in ("q", "k", "v", "proj_out") and tensor.dim() == 2:
            tensor = tensor[:, :, None, None]  # Linear [C, C] -> 1x1 conv [C, C, 1, 1]
        out[target] = tensor.float()
    return out, ", ".join(str(f) for f in files), converted


def check_vq_tensors(tensors, vq, source):
    """The tensors the decode starts from must be there; sjd checks every shape when it loads."""
    expected = {"quantize.embedding.weight": [vq["codebook_size"], vq["embed_dim"]],
                "post_quant_conv.conv.weight": [vq["z_channels"], vq["embed_dim"], 3, 1, 1],
                "decoder.conv_in.weight": [vq["ch"] * vq["ch_mult"][-1], vq["z_channels"], 3, 3]}
    check_vq_shapes(tensors, expected, source)


# --------------------------------------------------------------------------- export


def run(args, staged):
    """Writes the bundle into `staged` (common.StagedBundle); returns the report's (file, what) lines."""
    hf_dir, vq_dir = Path(args.hf_dir), Path(args.vision_tokenizer_dir)
    config_file = hf_dir / "config.json"
    config = read_json(config_file)
    where = str(config_file)
    index_file, weight_map = read_release_index(hf_dir)

    tiktoken_file = hf_dir / "emu3.tiktoken"
    specials = special_table(hf_dir / "emu3_vision_tokens.txt", tiktoken_file)
    names = token_names(hf_dir)
    for field, token in CONFIG_ID_FIELDS.items():
        if field in config and config[field] is not None and specials.get(names[token]) != config[field]:
            raise ValueError(f"{where}: {field} is {config[field]} but the tokenizer files make "
                             f"{names[token]!r} id {specials.get(names[token])}")
    transformer = transformer_section(config, index_file.name, where)
    if transformer["vocab_size"] != SPECIAL_START_ID + len(specials):
        end = SPECIAL_START_ID + len(specials)
        raise ValueError(f"{where}: vocab_size {transformer['vocab_size']} but the tokenizer files give {end} ids "
                         f"(the special tokens end at {end - 1})")

    vq_config_file = vq_dir / "config.json"
    vq = vq_section(read_json(vq_config_file), str(vq_config_file))
    tensors, vq_source, converted = vq_tensors(vq_dir)
    check_vq_tensors(tensors, vq, vq_source)

    if args.resolution is not None and args.resolution <= 0:
        raise ValueError(f"--resolution {args.resolution}: must be a positive image side in pixels")
    image_area = args.resolution ** 2 if args.resolution else optional_int(config, "image_area", where,
                                                                           DEFAULT_IMAGE_AREA)
    if args.resolution and args.resolution % vq["downsample"]:
        raise ValueError(f"--resolution {args.resolution}: Emu3 images are whole {vq['downsample']}-pixel VQ cells")
    layout = layout_section(names, specials, image_area,
                            optional_int(config, "max_position_embeddings", where, DEFAULT_MAX_POSITIONS),
                            vq["codebook_size"], vq["downsample"], where)

    link_release_weights(index_file, weight_map, staged)
    save_safetensors(staged.stage / "movq.safetensors", tensors)
    copy_into_bundle(tiktoken_file, staged, "emu3.tiktoken")
    bundle = {
        "format": "sjd-bundle",
        "version": 1,
        "name": args.name or hf_dir.resolve().name,
        "family": "emu3",
        "transformer": transformer,
        "layout": layout,
        "tokenizer": {"kind": "tiktoken", "file": "emu3.tiktoken", "special_tokens": specials},
        "vq": vq,
        "defaults": DEFAULTS,
        "source": {"exporter": "emu3", "hf_dir": str(hf_dir.resolve()), "vq_weights": vq_source,
                   "vq_names": "converted from transformers' Emu3VQVAE" if converted else "as released"},
    }
    write_json_atomic(staged.stage / "bundle.json", bundle)
    side = round(image_area ** 0.5 / vq["downsample"])
    ids = {key: specials[name] for key, name in layout["tokens"].items()}
    return [
        ("bundle.json", f"emu3, {side}x{side} codes -> {side * vq['downsample']} px, {side * (side + 1) + 3} "
                        f"generated tokens; transformer weights {transformer['weights'][0]}; "
                        f"{len(specials)} special tokens; ids {ids}"),
        ("emu3.tiktoken", f"copied from {tiktoken_file}"),
        ("movq.safetensors", f"{len(tensors)} decoder-side tensors (float32) from {vq_source}"
                             + (" (renamed from transformers' Emu3VQVAE names)" if converted else "")),
    ]


def add_parser(subparsers):
    p = subparsers.add_parser("emu3", help="Emu3-Gen (HF folder + Emu3-VisionTokenizer folder)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hf-dir", required=True,
                   help="the BAAI/Emu3-Gen folder (config.json, shards, index, emu3.tiktoken)")
    p.add_argument("--vision-tokenizer-dir", required=True, help="the BAAI/Emu3-VisionTokenizer folder")
    p.add_argument("--out", required=True, help="bundle folder to write (may be HF-DIR itself)")
    p.add_argument("--resolution", type=int,
                   help="default image side in pixels, a multiple of 8 (default: config.json's image_area, 720x720)")
    p.add_argument("--name", help="bundle name (default: the HF folder's name)")
    p.set_defaults(run=run)
