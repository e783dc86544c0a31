#!/usr/bin/env python3
"""Writes the tiny random default model bundle (models/default/).

  scripts/make_default_model.py [--seed 0] [--out models/default]

The bundle is a Lumina-mGPT-family model at toy size: a 2-layer Chameleon-style
transformer (qk-norm, HF key names) and a Chameleon-style VQGAN decoder, both
random. It exists so that every command, test and demo of sjd runs without
downloading weights. Output is byte-for-byte deterministic for a given seed:
weights come from one seeded CPU torch.Generator in a fixed order, safetensors
writes a sorted header, and bundle.json is written with fixed key order.

Scales are chosen so the model behaves like a model rather than noise or a
constant: logits over the vocabulary have a standard deviation of about 2,
and the decoded images use the whole colour range.
"""
import argparse
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file

# Architecture numbers: docs/bundles.md's schema example describes this bundle.
VOCAB = 560
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 4
HEAD_DIM = 16
INTERMEDIATE = 172

CODEBOOK = 256
EMBED_DIM = 16
Z_CHANNELS = 16
CH = 32
CH_MULT = [1, 1, 2, 2]
NUM_RES_BLOCKS = 1

# Final RMSNorm output has unit RMS, so logit std ~ LM_HEAD_STD * sqrt(HIDDEN) = 2.
LM_HEAD_STD = 2.0 / math.sqrt(HIDDEN)
# conv_out's weight scale relative to 1/sqrt(fan_in). At 1 the raw RGB output
# has a standard deviation of ~0.7 in [-1, 1]: colourful, with ~14% of the
# values clipped (2.0 clips 40%, 0.6 looks washed out).
CONV_OUT_GAIN = 1.0


def bundle_json():
    """The bundle description, in the key order of docs/bundles.md."""
    return {
        "format": "sjd-bundle",
        "version": 1,
        "name": "sjd-tiny-random",
        "family": "lumina-mgpt",
        "transformer": {
            "weights": ["model.safetensors"],
            "vocab_size": VOCAB,
            "hidden_size": HIDDEN,
            "num_layers": LAYERS,
            "num_heads": HEADS,
            "num_kv_heads": KV_HEADS,
            "head_dim": HEAD_DIM,
            "intermediate_size": INTERMEDIATE,
            "norm_eps": 1e-5,
            "rope": "1d",
            "rope_theta": 10000.0,
            "qk_norm": True,
            "qk_norm_eps": 1e-5,
            "key_style": "hf",
        },
        "layout": {
            "kind": "lumina-mgpt",
            "grid_height": 16,
            "grid_width": 16,
            "image_token_first": 4,
            "codebook_size": CODEBOOK,
            "bos_id": 0,
            "begin_image_id": 260,
            "end_image_id": 261,
            "newline_id": 262,
            "end_of_turn_id": 263,
            "size_token_base": 264,
            "size_token_unit_px": 32,
            "prompt_template": "Generate an image of {width}x{height} according to the following prompt:\n{prompt}",
        },
        "tokenizer": {"kind": "byte", "first_id": 304},
        "vq": {
            "kind": "chameleon-vqgan",
            "weights": ["vqgan.safetensors"],
            "codebook_size": CODEBOOK,
            "embed_dim": EMBED_DIM,
            "z_channels": Z_CHANNELS,
            "ch": CH,
            "ch_mult": CH_MULT,
            "num_res_blocks": NUM_RES_BLOCKS,
            "attn_resolutions": [],
            "out_channels": 3,
            "downsample": 2 ** (len(CH_MULT) - 1),
        },
        "defaults": {"cfg": 3.0, "temperature": 1.0, "top_k": 2000, "method": "ar"},
    }


class Sampler:
    """Draws every tensor from one generator, in call order (the order is part of the format)."""

    def __init__(self, seed):
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.tensors = {}

    def normal(self, name, shape, std=1.0, mean=0.0):
        t = torch.randn(shape, generator=self.generator, dtype=torch.float32)
        self.tensors[name] = (t * std + mean).contiguous()

    # Norm scales near 1 with a little spread, so a loader that swaps weight
    # and bias or ignores one of them gives visibly different outputs.
    def norm(self, name, shape, with_bias):
        self.normal(name + ".weight", shape, std=0.1, mean=1.0)
        if with_bias:
            self.normal(name + ".bias", shape, std=0.1)

    def conv(self, name, cin, cout, kernel, gain=1.0):
        self.normal(name + ".weight", [cout, cin, kernel, kernel], std=gain / math.sqrt(cin * kernel * kernel))
        self.normal(name + ".bias", [cout], std=0.05)


def transformer_tensors(seed):
    s = Sampler(seed)
    s.normal("model.embed_tokens.weight", [VOCAB, HIDDEN])
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        s.norm(p + "input_layernorm", [HIDDEN], with_bias=False)
        for proj, rows in (("q", HEADS), ("k", KV_HEADS), ("v", KV_HEADS)):
            s.normal(p + f"self_attn.{proj}_proj.weight", [rows * HEAD_DIM, HIDDEN], std=1 / math.sqrt(HIDDEN))
        s.normal(p + "self_attn.o_proj.weight", [HIDDEN, HEADS * HEAD_DIM], std=1 / math.sqrt(HEADS * HEAD_DIM))
        # Lumina-mGPT stores one [1, head_dim] qk-norm shared by all heads.
        s.norm(p + "self_attn.q_norm", [1, HEAD_DIM], with_bias=True)
        s.norm(p + "self_attn.k_norm", [1, HEAD_DIM], with_bias=True)
        s.norm(p + "post_attention_layernorm", [HIDDEN], with_bias=False)
        s.normal(p + "mlp.gate_proj.weight", [INTERMEDIATE, HIDDEN], std=1 / math.sqrt(HIDDEN))
        s.normal(p + "mlp.up_proj.weight", [INTERMEDIATE, HIDDEN], std=1 / math.sqrt(HIDDEN))
        s.normal(p + "mlp.down_proj.weight", [HIDDEN, INTERMEDIATE], std=1 / math.sqrt(INTERMEDIATE))
    s.norm("model.norm", [HIDDEN], with_bias=False)
    s.normal("lm_head.weight", [VOCAB, HIDDEN], std=LM_HEAD_STD)
    return s.tensors


def vqgan_tensors(seed):
    # A different stream from the transformer's, so either file can change alone.
    s = Sampler(seed + 1)
    # Unit-variance codes keep distinct codes far apart after the first convs.
    s.normal("quantize.embedding.weight", [CODEBOOK, EMBED_DIM])
    s.conv("post_quant_conv", EMBED_DIM, Z_CHANNELS, 1)

    def resnet(name, cin, cout):
        s.norm(name + ".norm1", [cin], with_bias=True)
        s.conv(name + ".conv1", cin, cout, 3)
        s.norm(name + ".norm2", [cout], with_bias=True)
        s.conv(name + ".conv2", cout, cout, 3)
        if cin != cout:
            s.conv(name + ".nin_shortcut", cin, cout, 1)

    channels = CH * CH_MULT[-1]
    s.conv("decoder.conv_in", Z_CHANNELS, channels, 3)
    resnet("decoder.mid.block_1", channels, channels)
    s.norm("decoder.mid.attn_1.norm", [channels], with_bias=True)
    for part in ("q", "k", "v", "proj_out"):
        s.conv(f"decoder.mid.attn_1.{part}", channels, channels, 1)
    resnet("decoder.mid.block_2", channels, channels)
    for level in reversed(range(len(CH_MULT))):
        out = CH * CH_MULT[level]
        for j in range(NUM_RES_BLOCKS + 1):
            resnet(f"decoder.up.{level}.block.{j}", channels, out)
            channels = out
        if level != 0:
            s.conv(f"decoder.up.{level}.upsample.conv", out, out, 3)
    s.norm("decoder.norm_out", [channels], with_bias=True)
    s.conv("decoder.conv_out", channels, 3, 3, gain=CONV_OUT_GAIN)
    return s.tensors


def write_safetensors(path, tensors, seed):
    ordered = {name: tensors[name] for name in sorted(tensors)}
    # One metadata entry only: safetensors writes the metadata map in hash
    # order, which would make the bytes differ between runs.
    metadata = {"generator": f"scripts/make_default_model.py --seed {seed}"}
    save_file(ordered, path, metadata=metadata)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "default")
    parser.add_argument("--out", default=default_out, help="output directory (default models/default)")
    args = parser.parse_args(argv)

    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), transformer_tensors(args.seed), args.seed)
    write_safetensors(os.path.join(args.out, "vqgan.safetensors"), vqgan_tensors(args.seed), args.seed)
    with open(os.path.join(args.out, "bundle.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(bundle_json(), f, indent=2, ensure_ascii=False)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(args.out, n))
                for n in ("bundle.json", "model.safetensors", "vqgan.safetensors"))
    print(f"wrote {os.path.normpath(args.out)} (seed {args.seed}, {total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
