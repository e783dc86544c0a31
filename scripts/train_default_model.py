#!/usr/bin/env python3
"""Trains the default model's transformer: captions -> VQ image codes, in the Lumina-mGPT layout.

  scripts/train_default_model.py --vq-dir work/vq --text-dir work/text --out-dir work/hf \
      [--scenes 32000] [--steps 11000] [--seed 0] [--threads 1] [--device cuda]
      [--hidden-size 256 --layers 4 --heads 4 --intermediate-size 704] [--image-size 64]
      [--state-dir DIR --time-limit SECONDS | --finish-within SECONDS] [--init-from HF_DIR]
      [--autocast auto|bf16|off]

--init-from starts from the transformer weights of an earlier run's Hugging Face folder (same
architecture and vocabulary) instead of a random initialisation: the 128 px model is the 64 px
one trained on further at 32 x 32 codes. RoPE has no learned table, so the longer sequences need
no new weights; the optimiser and the schedule start afresh.

--finish-within SECONDS sets the number of steps (at most --steps) so that training ends that many
seconds after the start, encoding included: a throwaway copy of the model is timed for a few steps
first, and the run then trains with the step count it chose (train_report.json records it; on
the CPU --steps N without it gives the same weights). A sweep on a device machine gives each setting
an equal share of a call this way (scripts/device_sweep.sh).

--time-limit (seconds from the start, encoding included) stops training at the first step that
ends past the limit (every run makes at least one step) and saves the whole
training state (weights, optimiser, schedule, data order and random streams) in --state-dir,
in files of at most 15 MiB (what a device machine's ten-minute command can bring back); the
same command run again with that folder resumes where it stopped, and on the CPU the finished
weights are bit-identical to an uninterrupted run (a GPU's own runs differ: its attention
backward adds in no fixed order). --compact-state keeps the
optimiser's moments in bfloat16 (a third smaller, for carrying back to a device machine; the
weights then depend on where the pauses fell). Exit code 0: finished (the folder is
written); 75: paused, run again to continue; 2: a saved state that cannot be resumed (other
settings, a part missing or altered, or a state.json that is not one: the message names it).

Needs the outputs of train_vq.py (vqgan.ckpt) and train_text_tokenizer.py (tokenizer.json,
vocabulary.json). Encodes --scenes training scenes to 16x16 codes (--image-size 128: 32x32; cached
in --out-dir/codes.npz, reused when the VQ checkpoint, seed, count, size and scene options match), then trains a
Chameleon-architecture decoder (RMSNorm, SwiGLU, rotate-half RoPE, per-head LayerNorm on
q and k before RoPE) on the family's sequences:

  conditional:   <s> tokens("Generate an image of 64x64 according to the following prompt:\\n" + caption)
                 <reserved08706> <racm3:break> h w (16 codes <reserved08799>) x 16 <eoss> <reserved08706>
  unconditional: the generated part alone, from <racm3:break> at position 0 (what sjd's CFG row sees)

UNCOND_FRACTION of the examples are unconditional so classifier-free guidance has a
model to mix with. The loss covers the image codes only, with the softmax over the
image tokens: sjd forces every structure token and masks everything else at code
positions, so those are the only choices the model makes.

Writes a Hugging Face Chameleon-style folder, the format Lumina-mGPT is released in:
config.json (architecture numbers and the whole vocabulary_map), model.safetensors with
its model.safetensors.index.json, tokenizer.json and tokenizer_config.json; and
train_report.json (losses, timings). Deterministic for a given seed, thread count and precision (--autocast:
bf16 autocast where the hardware has bf16 arithmetic, float32 elsewhere; training_precision.py).

--object-loss-weight W weighs the codes near an object (within OBJECT_REGION_RADII of its centre) W times the
others in the loss; the losses printed and reported are then the weighted mean. --background-variety trains on
scenes.scene(..., variety=True) scenes (horizontal and diagonal stripes too; their codes are cached apart).
Both were tried on v3 and not kept (docs/default_model.md). --all-pairs trains on scenes.scene(..., all_pairs=True)
scenes: every (colour, shape) pair, scenes.HELD_OUT_PAIRS included, never an evaluation caption of
scenes.RESERVED_EVAL. All three are settings a saved state must match.
"""
import argparse
import concurrent.futures
import contextlib
import functools
import hashlib
import io
import json
import math
import multiprocessing
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402
import training_precision  # noqa: E402
import train_text_tokenizer  # noqa: E402
import train_vq  # noqa: E402

ARCH = {
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "intermediate_size": 704,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 512,
}
QK_NORM_EPS = 1e-5
SHARD_BYTES = 15 * 1024 * 1024  # safetensors shards small enough for a device machine to bring back
UNCOND_FRACTION = 0.1
PROBE_WARMUP, PROBE_STEPS = 3, 20  # untimed, then timed steps that price a step for --finish-within
# --object-loss-weight covers the codes within this many object radii of an object's centre: the whole shape with
# its edges (a triangle reaches 1.2 radii, a square's corners 1.2) and a ring's hole, where its shape is decided.
OBJECT_REGION_RADII = 1.3
DOWNSAMPLE = 2 ** (len(train_vq.CONFIG["ch_mult"]) - 1)


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + self.eps) * self.weight


class HeadNorm(nn.Module):
    """Chameleon's LayerNorm over head_dim, one [1, head_dim] weight and bias shared by all heads (as Lumina's)."""

    def __init__(self, head_dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, head_dim))
        self.bias = nn.Parameter(torch.zeros(1, head_dim))

    def forward(self, x):  # [B, T, heads, head_dim]
        return F.layer_norm(x.float(), x.shape[-1:], eps=QK_NORM_EPS) * self.weight + self.bias


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


def rope_tables(positions, head_dim, theta):
    """cos, sin [T, head_dim] for rotate-half RoPE (pairs i and i + head_dim/2)."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.double()[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos()] * 2, -1).float(), torch.cat([angles.sin()] * 2, -1).float()


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads = a["num_attention_heads"]
        self.head_dim = a["hidden_size"] // self.heads
        hidden = a["hidden_size"]
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.q_norm = HeadNorm(self.head_dim)
        self.k_norm = HeadNorm(self.head_dim)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        shape = (b, t, self.heads, self.head_dim)
        q = self.q_norm(self.q_proj(x).view(shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(shape)).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q.to(v.dtype), k.to(v.dtype), v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.gate_proj = nn.Linear(a["hidden_size"], a["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(a["hidden_size"], a["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(a["intermediate_size"], a["hidden_size"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.input_layernorm = RMSNorm(a["hidden_size"], a["rms_norm_eps"])
        self.self_attn = Attention(a)
        self.post_attention_layernorm = RMSNorm(a["hidden_size"], a["rms_norm_eps"])
        self.mlp = MLP(a)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class ChameleonLM(nn.Module):
    """Module names are HF Chameleon's, so state_dict() has the release's tensor names."""

    def __init__(self, a, vocab_size):
        super().__init__()
        self.arch = a
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab_size, a["hidden_size"])
        self.model.layers = nn.ModuleList(Layer(a) for _ in range(a["num_hidden_layers"]))
        self.model.norm = RMSNorm(a["hidden_size"], a["rms_norm_eps"])
        self.lm_head = nn.Linear(a["hidden_size"], vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or "embed" in name or "lm_head" in name:
                std = 0.02 / math.sqrt(2 * a["num_hidden_layers"]) if name.endswith(("o_proj.weight",
                                                                                     "down_proj.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def hidden(self, ids):
        """ids [B, T] (positions 0..T-1) -> final hidden states [B, T, H]."""
        head_dim = self.arch["hidden_size"] // self.arch["num_attention_heads"]
        cos, sin = rope_tables(torch.arange(ids.shape[1]), head_dim, self.arch["rope_theta"])
        cos, sin = cos.to(ids.device), sin.to(ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)


def generated_tokens(codes, layout):
    """The generated part of a sequence for one [grid, grid] code grid (the image is grid x DOWNSAMPLE px)."""
    grid = codes.shape[0]
    size = layout["size_token_base"] + grid * DOWNSAMPLE // layout["size_token_unit_px"]
    rows = np.concatenate([codes + layout["image_token_first"], np.full((grid, 1), layout["newline_id"])], 1)
    return np.concatenate([[layout["begin_image_id"], size, size], rows.reshape(-1),
                           [layout["end_image_id"], layout["end_of_turn_id"]]]).astype(np.int64)


def prompt_tokens(tokenizer, layout, caption, image_size):
    side = str(image_size)
    text = layout["prompt_template"].replace("{width}", side).replace("{height}", side).replace("{prompt}", caption)
    return [layout["bos_id"]] + tokenizer.encode(text, add_special_tokens=False).ids + [layout["end_of_turn_id"]]


def max_positions(image_size):
    """The config's max_position_embeddings: 512 (v1 and v2's) while a prompt of up to 128 tokens and the image
    fit, else the next power of two that holds them."""
    grid = image_size // DOWNSAMPLE
    needed = 128 + 5 + grid * (grid + 1)
    return 512 if needed <= 512 else 1 << (needed - 1).bit_length()


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


ENCODE_BATCH = 32    # scenes per encoder call: part of the recipe (the encoder's sums depend on it)
ENCODE_BLOCK = 1024  # scenes drawn at a time (50 MB of 128 px images), a whole number of batches


def drawing_workers(device, threads):
    """How many processes draw the scenes: every core this process may use beside a GPU, the run's
    threads on a CPU."""
    return len(os.sched_getaffinity(0)) if device.type != "cpu" else threads


def drawing_pool(workers):
    """Processes that draw scenes (forked: they run numpy only, never torch; a worker that dies fails
    the run instead of leaving it waiting), or None when this process draws alone."""
    if workers <= 1:
        return contextlib.nullcontext(None)
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def draw_scenes(pool, some_scenes, image_size):
    """The scenes' uint8 images, in order."""
    draw = functools.partial(scenes.render, size=image_size)
    if pool is None:
        return [draw(s) for s in some_scenes]
    return list(pool.map(draw, some_scenes, chunksize=16))


@torch.no_grad()
def encode_scenes(vq_dir, train_scenes, seed, variety, all_pairs, image_size, cache, threads, device, precision):
    """codes [count, grid, grid] of the training scenes drawn at image_size px. train_scenes must be
    scenes.scene(seed, "train", i, variety, all_pairs) for i < count: seed, variety, all_pairs and the precision
    (with the VQ checkpoint's digest) are the cache's key. The VQGAN is convolutional: one trained at 64 px encodes 128 px scenes to 32 x 32 codes."""
    count = len(train_scenes)
    digest = file_digest(os.path.join(vq_dir, "vqgan.ckpt"))
    if os.path.exists(cache):
        cached = np.load(cache)
        # Older caches have no flag for an option that did not exist yet: they are plain.
        cached_variety = bool(cached["variety"]) if "variety" in cached.files else False
        cached_all_pairs = bool(cached["all_pairs"]) if "all_pairs" in cached.files else False
        cached_precision = str(cached["autocast"]) if "autocast" in cached.files else "bf16"
        if (str(cached["vq_digest"]) == digest and int(cached["seed"]) == seed and len(cached["codes"]) >= count
                and cached["codes"].shape[1] * DOWNSAMPLE == image_size and cached_variety == variety
                and cached_all_pairs == all_pairs and cached_precision == precision):
            return cached["codes"][:count], 0.0
    torch.set_num_threads(threads)
    start, chunks = time.time(), []
    # Drawing a scene is numpy on one core (about 1 ms at 128 px), which a GPU's encoding leaves the
    # whole time: there, every core draws. A scene's pixels are a pure function of its description, so
    # the codes do not depend on how many processes draw them; the encoder's batches stay the same.
    with drawing_pool(drawing_workers(device, threads)) as pool:
        model = train_vq.load(vq_dir).to(device, memory_format=torch.channels_last)
        for block in range(0, count, ENCODE_BLOCK):
            drawn = draw_scenes(pool, train_scenes[block:block + ENCODE_BLOCK], image_size)
            for first in range(0, len(drawn), ENCODE_BATCH):
                images = np.stack(drawn[first:first + ENCODE_BATCH])
                pixels = train_vq.to_pixels(images).to(device).contiguous(memory_format=torch.channels_last)
                with training_precision.autocast(precision, device):
                    _, codes = model.encode(pixels)
                chunks.append(codes.cpu().numpy().astype(np.int16))
            print(f"encoded {block + len(drawn)}/{count} scenes  {time.time() - start:.0f} s", flush=True)
    codes = np.concatenate(chunks)
    np.savez(cache, codes=codes, vq_digest=digest, seed=seed, variety=variety, all_pairs=all_pairs, autocast=precision)
    return codes, time.time() - start


def object_regions(train_scenes, grid):
    """Boolean [count, grid, grid]: the codes of each scene whose patch comes within
    OBJECT_REGION_RADII object radii of an object's centre (positions and sizes are fractions of the side, so the
    regions do not depend on the pixel size)."""
    centres = (np.arange(grid) + 0.5) / grid
    x, y = np.meshgrid(centres, centres)
    half = 0.5 / grid  # a patch's half side: the nearest point of a patch is at most this far off its centre per axis
    regions = np.zeros((len(train_scenes), grid, grid), dtype=bool)
    for i, s in enumerate(train_scenes):
        for o in s["objects"]:
            cx, cy = scenes.POSITIONS[o["position"]]
            dx = np.maximum(np.abs(x - cx) - half, 0.0)
            dy = np.maximum(np.abs(y - cy) - half, 0.0)
            regions[i] |= dx * dx + dy * dy <= (OBJECT_REGION_RADII * scenes.SIZES[o["size"]]) ** 2
    return regions


def make_batch(rows, codes, prompts, layout, rng, code_weights=None):
    """(ids [B, T], code targets [B, T] with -100 where there is no image code to predict, and with code_weights
    ([N, grid, grid]) the weight of each target [B, T], else None)."""
    sequences = []
    for i in rows:
        generated = generated_tokens(codes[i], layout)
        uncond = rng.random() < UNCOND_FRACTION
        sequences.append(generated if uncond else np.concatenate([prompts[i], generated]))
    length = max(len(s) for s in sequences) - 1
    ids = np.full((len(rows), length), layout["bos_id"], dtype=np.int64)  # right padding, never a target
    targets = np.full((len(rows), length), -100, dtype=np.int64)
    weights = None if code_weights is None else np.zeros((len(rows), length), dtype=np.float32)
    first, last = layout["image_token_first"], layout["image_token_first"] + layout["codebook_size"]
    for b, s in enumerate(sequences):
        ids[b, :len(s) - 1] = s[:-1]
        nxt = s[1:]
        is_code = (nxt >= first) & (nxt < last)
        targets[b, :len(s) - 1] = np.where(is_code, nxt - first, -100)
        if weights is not None:  # the codes come in raster order, as the weights are stored
            weights[b, :len(s) - 1][is_code] = code_weights[rows[b]].reshape(-1)
    return torch.from_numpy(ids), torch.from_numpy(targets), None if weights is None else torch.from_numpy(weights)


def code_loss(model, ids, targets, layout, weights=None):
    """Cross-entropy of the image codes, softmax over the image tokens only; with weights, their weighted mean.
    targets and weights may stay on the host: the positions with a code target are found there, so a GPU never
    waits for a mask's count (the same rows in the same order as a boolean mask's, so the same sums)."""
    # Copied before the forward is queued: a copy from pageable host memory waits for the stream.
    kept = (targets.flatten() >= 0).nonzero().flatten()
    kept_targets = targets.flatten()[kept].to(ids.device)
    w = None if weights is None else weights.flatten()[kept].to(ids.device)
    kept = kept.to(ids.device)
    h = model.hidden(ids)
    first = layout["image_token_first"]
    head = model.lm_head.weight[first:first + layout["codebook_size"]]
    logits = h.flatten(0, 1).index_select(0, kept).to(head.dtype) @ head.T
    if w is None:
        return F.cross_entropy(logits.float(), kept_targets)
    return (F.cross_entropy(logits.float(), kept_targets, reduction="none") * w).sum() / w.sum()


def make_optimizer(model, lr):
    """AdamW with weight decay on the 2-D weights other than norms."""
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "norm" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "norm" not in n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95))


def train_step(model, optimizer, rows, codes, prompts, layout, rng, device, precision, code_weights=None):
    """One optimiser step on the scenes `rows`; returns the loss as a tensor on the device, which the caller
    reads when it needs the number (a read waits for the step: on a GPU the next batch is built meanwhile)."""
    ids, targets, weights = make_batch(rows, codes, prompts, layout, rng, code_weights)
    ids = ids.to(device)
    # sjd runs the weights in float32 whatever the training's precision (training_precision.py says which pays).
    with training_precision.autocast(precision, device):
        loss = code_loss(model, ids, targets, layout, weights)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()


def seconds_per_step(arch, vocab_size, codes, prompts, layout, batch_size, lr, device, seed, precision,
                     code_weights=None):
    """Wall time of one training step at these settings, timed on a throwaway model with its own data
    order, so the run's model, optimiser and data stream are as they would be without it (its initial
    values are drawn after the run's model is made, and nothing after that draws from torch's generator)."""
    model = ChameleonLM(arch, vocab_size).to(device)
    optimizer = make_optimizer(model, lr)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 12]))
    for step in range(PROBE_WARMUP + PROBE_STEPS):
        if step == PROBE_WARMUP:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.time()
        loss = train_step(model, optimizer, rng.integers(0, len(codes), batch_size), codes, prompts, layout, rng,
                          device, precision, code_weights)
    loss.item()  # waits for the device: the clock sees the last step end
    return (time.time() - start) / PROBE_STEPS


def saved_precision(state_dir):
    """The precision a paused run in state_dir trained in ('bf16' for states from before --autocast), or None
    without one: --autocast auto resumes in it, so a state moved to a machine that would choose otherwise
    finishes as it began."""
    try:
        manifest = state_manifest(state_dir) if state_dir else None
    except StateError:
        return None  # load_state refuses it, naming what is wrong
    saved = manifest["settings"].get("autocast", "bf16") if manifest else None
    return saved if saved in ("bf16", "off") else None


def read_hf_weights(hf_dir, text_dir):
    """The transformer tensors of an HF folder written by write_hf_folder, and a digest of them (which the training
    settings record). Raises StateError naming what is missing or unreadable, or a tokenizer other than
    text_dir's (the embedding rows would mean other tokens)."""
    index_path = os.path.join(hf_dir, "model.safetensors.index.json")
    tokenizer_path = os.path.join(hf_dir, "tokenizer.json")
    try:
        with open(index_path, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        if file_digest(tokenizer_path) != file_digest(os.path.join(text_dir, "tokenizer.json")):
            raise StateError(f"{tokenizer_path}: another tokenizer than --text-dir's")
        loaded, digest = {}, hashlib.sha256()
        for file in files:
            digest.update(file_digest(os.path.join(hf_dir, file)).encode())
            loaded.update(load_file(os.path.join(hf_dir, file)))
    except FileNotFoundError as e:
        raise StateError(f"{e.filename}: missing (--init-from needs an HF folder this script wrote)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:  # unreadable JSON or safetensors
        raise StateError(f"{hf_dir}: not a readable HF folder ({e})") from None
    return loaded, digest.hexdigest()


def apply_hf_weights(model, loaded, hf_dir):
    """Copies `loaded` into `model`: every tensor must be there with the model's shape."""
    own = model.state_dict()
    for name in sorted(set(own) | set(loaded)):
        if name not in loaded:
            raise StateError(f"{hf_dir}: tensor {name} missing (the model has it)")
        if name not in own:
            raise StateError(f"{hf_dir}: tensor {name} is not in this architecture")
        if loaded[name].shape != own[name].shape:
            raise StateError(f"{hf_dir}: tensor {name} has shape {list(loaded[name].shape)}, the model "
                             f"{list(own[name].shape)}")
    model.load_state_dict({name: t.to(own[name].dtype) for name, t in loaded.items()})


def hf_config(arch, vocabulary_map, vocab_size, vq_config):
    c = {
        "architectures": ["ChameleonForConditionalGeneration"],
        "model_type": "chameleon",
        "vocab_size": vocab_size,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "swin_norm": False,
        "tie_word_embeddings": False,
        "model_parallel_size": 1,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "rope_scaling": None,
        "bos_token_id": vocabulary_map["<s>"],
        "pad_token_id": vocabulary_map["<pad>"],
        "eos_token_id": vocabulary_map["</s>"],
        "torch_dtype": "bfloat16",
    }
    c.update(arch)
    c["vq_config"] = {
        "embed_dim": vq_config["embed_dim"],
        "num_embeddings": vq_config["n_embed"],
        "double_latent": False,
        "latent_channels": vq_config["z_channels"],
        "resolution": vq_config["resolution"],
        "in_channels": vq_config["in_channels"],
        "out_channels": vq_config["out_ch"],
        "base_channels": vq_config["ch"],
        "channel_multiplier": vq_config["ch_mult"],
        "num_res_blocks": vq_config["num_res_blocks"],
        "attn_resolutions": vq_config["attn_resolutions"],
        "dropout": 0.0,
        "attn_type": "vanilla",
    }
    c["vocabulary_map"] = vocabulary_map
    return c


def write_hf_folder(out_dir, model, text_dir, layout):
    """The release format: config.json, the safetensors shards (one while the weights fit in SHARD_BYTES)
    and their index, tokenizer files.
    Weights are stored in bfloat16, as Lumina-mGPT's are (and the model was trained under bf16 autocast)."""
    tensors = {k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in sorted(model.state_dict().items())}
    shards = [[]]  # tensor names per shard, each shard at most SHARD_BYTES (a larger tensor alone)
    for name, t in tensors.items():
        size = sum(tensors[n].nbytes for n in shards[-1])
        if shards[-1] and size + t.nbytes > SHARD_BYTES:
            shards.append([])
        shards[-1].append(name)
    for old in os.listdir(out_dir):  # shards of an earlier run with another count
        if old.startswith("model") and old.endswith(".safetensors"):
            os.remove(os.path.join(out_dir, old))
    weight_map = {}
    for i, names in enumerate(shards):
        # One shard keeps the v1 name; more follow the release's model-0000i-of-0000n naming.
        file = "model.safetensors" if len(shards) == 1 else f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: tensors[n] for n in names}, os.path.join(out_dir, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in names})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(text_dir, "tokenizer.json"), os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(text_dir, "tokenizer.json"), encoding="utf-8") as f:
        vocabulary_map = json.load(f)["model"]["vocab"]
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "pad_token": "<pad>", "unk_token": "<unk>", "add_bos_token": False}, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_config(model.arch, vocabulary_map, layout["vocab_size"], train_vq.CONFIG), f, indent=2,
                  ensure_ascii=False)
        f.write("\n")


PAUSED = 75  # exit code: stopped at --time-limit with the state saved; run again to continue
STATE_PART_BYTES = 15 * 1024 * 1024


def compact_moments(optimizer_state):
    """AdamW's moments in bfloat16 (load_state_dict casts them back to the parameters' dtype)."""
    state = {i: {k: v.to(torch.bfloat16) if k in ("exp_avg", "exp_avg_sq") else v for k, v in entry.items()}
             for i, entry in optimizer_state["state"].items()}
    return {"state": state, "param_groups": optimizer_state["param_groups"]}


def save_state(state_dir, state):
    """torch.save of `state`, split into parts of at most STATE_PART_BYTES named after the step,
    then a manifest naming them with their digests, then the files of earlier states go. The
    manifest is replaced last, so a save cut short leaves the previous state whole."""
    os.makedirs(state_dir, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    parts = []
    for i, first in enumerate(range(0, len(data), STATE_PART_BYTES)):
        name = f"state.step{state['step']}.part{i:03d}"
        chunk = data[first:first + STATE_PART_BYTES]
        with open(os.path.join(state_dir, name + ".tmp"), "wb") as f:
            f.write(chunk)
        os.replace(os.path.join(state_dir, name + ".tmp"), os.path.join(state_dir, name))
        parts.append({"file": name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    manifest = {"step": state["step"], "settings": state["settings"], "parts": parts}
    with open(os.path.join(state_dir, "state.json.tmp"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(os.path.join(state_dir, "state.json.tmp"), os.path.join(state_dir, "state.json"))
    keep = {"state.json"} | {part["file"] for part in parts}
    for name in os.listdir(state_dir):
        if name.startswith("state.") and name not in keep:
            os.remove(os.path.join(state_dir, name))


class StateError(Exception):
    """A saved training state that cannot be resumed (main() exits with code 2)."""


def state_manifest(state_dir):
    """state.json of a saved state, or None when the folder has none; StateError when it is not one."""
    path = os.path.join(state_dir, "state.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise StateError(f"{path}: not a readable saved state ({e})") from None
    if not (isinstance(manifest, dict) and isinstance(manifest.get("settings"), dict)
            and isinstance(manifest.get("parts"), list)):
        raise StateError(f"{path}: not a saved state (no settings object or parts list)")
    return manifest


def load_state(state_dir, settings):
    """The state save_state wrote, or None when the folder has none; raises StateError for a state
    made with other settings or a part that is missing or altered (naming the file)."""
    path = os.path.join(state_dir, "state.json")
    manifest = state_manifest(state_dir)
    if manifest is None:
        return None
    if manifest["settings"] != settings:
        changed = sorted(k for k in set(settings) | set(manifest["settings"])
                         if settings.get(k) != manifest["settings"].get(k))
        raise StateError(f"{path}: saved with other settings ({', '.join(changed)}); use another --state-dir")
    data = bytearray()
    for part in manifest["parts"]:
        part_path = os.path.join(state_dir, part["file"])
        if not os.path.exists(part_path):
            raise StateError(f"{part_path}: missing (a part of the saved training state)")
        with open(part_path, "rb") as f:
            chunk = f.read()
        if hashlib.sha256(chunk).hexdigest() != part["sha256"]:
            raise StateError(f"{part_path}: its digest does not match {path}")
        data += chunk
    return torch.load(io.BytesIO(bytes(data)), map_location="cpu", weights_only=False)


def main(argv=None):
    # No abbreviations: scripts/device_sweep.sh refuses the flags it sets itself by their full names.
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--vq-dir", required=True)
    parser.add_argument("--text-dir", required=True)
    parser.add_argument("--out-dir", required=True, help="the Hugging Face style folder to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenes", type=int, default=32000, help="training scenes to encode")
    parser.add_argument("--steps", type=int, default=11000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="torch device to train on, e.g. cuda")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--hidden-size", type=int, default=ARCH["hidden_size"])
    parser.add_argument("--layers", type=int, default=ARCH["num_hidden_layers"])
    parser.add_argument("--heads", type=int, default=ARCH["num_attention_heads"])
    parser.add_argument("--intermediate-size", type=int, default=ARCH["intermediate_size"])
    parser.add_argument("--image-size", type=int, default=scenes.IMAGE_SIZE,
                        help="pixels per side of the training images (a multiple of 32: 128 gives 32 x 32 codes)")
    parser.add_argument("--state-dir", help="save the training state here at --time-limit, and resume from it")
    parser.add_argument("--time-limit", type=float,
                        help="seconds from the start (encoding the scenes included) before pausing at the next step "
                             "(needs --state-dir)")
    parser.add_argument("--finish-within", type=float, metavar="SECONDS",
                        help="choose the number of steps (at most --steps) from a timed probe so that training ends "
                             "this many seconds after the start, encoding included")
    parser.add_argument("--check-args", action="store_true",
                        help="check the arguments and stop (scripts/device_sweep.sh checks its candidates so)")
    parser.add_argument("--encode-only", action="store_true",
                        help="encode the scenes into --out-dir/codes.npz and stop (a sweep shares them)")
    parser.add_argument("--compact-state", action="store_true",
                        help="save the optimiser's moments in bfloat16 (the state shrinks by a third; a resumed run "
                             "then depends on where it paused)")
    parser.add_argument("--object-loss-weight", type=float, default=1.0, metavar="W",
                        help="weigh the loss of the codes on and around the objects W >= 1 times the background's "
                             "(their shapes are decided there, in a few codes among many plain ones)")
    parser.add_argument("--background-variety", action="store_true",
                        help="train on scenes with horizontal and diagonal stripes too (scenes.py: every colour "
                             "along a square's and a triangle's edges, without the held-out pairs)")
    parser.add_argument("--all-pairs", action="store_true",
                        help="train on every (colour, shape) pair, scenes.HELD_OUT_PAIRS included (the evaluation "
                             "captions stay unseen: scenes.RESERVED_EVAL)")
    parser.add_argument("--init-from", metavar="HF_DIR",
                        help="start from this HF folder's transformer weights (same architecture and vocabulary)")
    training_precision.add_argument(parser)
    args = parser.parse_args(argv)
    began = time.time()  # --time-limit counts from here: encoding the scenes is part of a call's time
    if (args.time_limit is not None or args.compact_state) and not args.state_dir:
        parser.error("--time-limit and --compact-state need --state-dir (where the paused state goes)")
    if args.finish_within is not None and (args.state_dir or not 0 < args.finish_within < math.inf):
        parser.error("--finish-within needs a positive number of seconds and no --state-dir (a timed run is not "
                     "paused and resumed)")
    for name in ("scenes", "steps", "batch_size", "hidden_size", "layers", "heads", "intermediate_size", "log_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.lr < math.inf:  # 0 is allowed: a frozen run (the tests use it)
        parser.error(f"--lr must be a number >= 0 (got {args.lr})")
    if not 1 <= args.object_loss_weight < math.inf:
        parser.error(f"--object-loss-weight must be a number >= 1 (got {args.object_loss_weight})")
    if args.hidden_size % args.heads:
        parser.error(f"--hidden-size {args.hidden_size} is not a multiple of --heads {args.heads}")
    if args.image_size <= 0 or args.image_size % 32:
        parser.error(f"--image-size {args.image_size} is not a positive multiple of 32 (Lumina's size token unit)")
    if args.check_args:
        return 0
    arch = dict(ARCH, hidden_size=args.hidden_size, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                num_key_value_heads=args.heads, intermediate_size=args.intermediate_size,
                max_position_embeddings=max_positions(args.image_size))
    device = torch.device(args.device)
    precision = saved_precision(args.state_dir) if args.autocast == "auto" else None
    precision = precision or training_precision.resolve(args.autocast, device)

    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tokenizer, layout = train_text_tokenizer.load(args.text_dir)
    try:  # before encoding the scenes (minutes at 128 px): a wrong folder is refused at once
        init_weights, init_digest = read_hf_weights(args.init_from, args.text_dir) if args.init_from else ({}, None)
    except StateError as e:
        print(f"train_default_model: {e}", file=sys.stderr)
        return 2
    # One list for the codes, the captions and the object regions, so that they describe the same scenes.
    train_scenes = [scenes.scene(args.seed, "train", i, args.background_variety, args.all_pairs)
                    for i in range(args.scenes)]
    codes, encode_seconds = encode_scenes(args.vq_dir, train_scenes, args.seed, args.background_variety,
                                          args.all_pairs, args.image_size, os.path.join(args.out_dir, "codes.npz"), args.threads,
                                          device, precision)
    if args.encode_only:
        print(f"encoded {args.scenes} scenes into {args.out_dir}/codes.npz ({encode_seconds:.0f} s)", flush=True)
        return 0
    prompts = [np.array(prompt_tokens(tokenizer, layout, s["caption"], args.image_size)) for s in train_scenes]
    code_weights = None
    if args.object_loss_weight != 1:  # 1 keeps the plain mean, bit for bit as before the option existed
        code_weights = np.where(object_regions(train_scenes, codes.shape[1]),
                                np.float32(args.object_loss_weight), np.float32(1))

    # Seeded here, not only at the start: encoding the scenes builds the VQGAN (its layers draw their initial
    # values) only when codes.npz is not cached, and the transformer must not depend on that.
    torch.manual_seed(args.seed)
    model = ChameleonLM(arch, layout["vocab_size"])  # initialised on the CPU: the same on every device
    try:
        if args.init_from:
            apply_hf_weights(model, init_weights, args.init_from)
    except StateError as e:
        print(f"train_default_model: {e}", file=sys.stderr)
        return 2
    model = model.to(device)
    params = sum(p.numel() for p in model.parameters())
    max_steps, probe_seconds = args.steps, None
    if args.finish_within is not None:
        probe_seconds = seconds_per_step(arch, layout["vocab_size"], codes, prompts, layout, args.batch_size, args.lr,
                                         device, args.seed, precision, code_weights)
        # A tenth kept back for the device's variation and writing the folder.
        left = args.finish_within - (time.time() - began)
        args.steps = max(1, min(max_steps, int(0.9 * left / probe_seconds)))
        print(f"probe: {probe_seconds * 1000:.1f} ms per step; {args.steps} steps fit in {left:.0f} s", flush=True)
    print(f"transformer: {params / 1e6:.2f} M parameters; {args.scenes} scenes; {args.steps} steps of "
          f"{args.batch_size}", flush=True)
    optimizer = make_optimizer(model, args.lr)
    warmup = max(1, min(50, args.steps // 10))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * (
        0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, s / args.steps)))))
    rng = np.random.default_rng(np.random.SeedSequence([args.seed, 11]))
    order = rng.permutation(args.scenes)
    cursor, losses, first_step, train_seconds = 0, [], 0, 0.0
    # Everything that decides the weights: a state saved under other values cannot be resumed.
    settings = {"arch": arch, "image_size": args.image_size, "scenes": args.scenes, "steps": args.steps, "batch_size": args.batch_size,
                "lr": args.lr, "seed": args.seed, "device": device.type, "threads": args.threads,
                "compact_state": args.compact_state,
                "vq": file_digest(os.path.join(args.vq_dir, "vqgan.ckpt")),
                "tokenizer": file_digest(os.path.join(args.text_dir, "tokenizer.json"))}
    if init_digest:  # only then: states paused before --init-from existed stay resumable
        settings["init_from"] = init_digest
    if code_weights is not None:  # likewise
        settings["object_loss_weight"] = args.object_loss_weight
    if args.background_variety:  # likewise
        settings["background_variety"] = True
    if args.all_pairs:  # likewise
        settings["all_pairs"] = True
    if precision != "bf16":  # likewise: every run trained under bf16 autocast before --autocast existed
        settings["autocast"] = precision
    try:
        saved = load_state(args.state_dir, settings) if args.state_dir else None
    except StateError as e:
        print(f"train_default_model: {e}", file=sys.stderr)
        return 2
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        rng.bit_generator.state = saved["rng"]
        torch.set_rng_state(saved["torch_rng"])
        order, cursor, losses = saved["order"], saved["cursor"], saved["losses"]
        first_step, train_seconds = saved["step"], saved["train_seconds"]
        print(f"resumed from {args.state_dir} at step {first_step}", flush=True)
    start = time.time() - train_seconds
    limit = began + args.time_limit if args.time_limit is not None else None
    pending = None  # the last step's loss, not yet read from the device

    def settle():
        nonlocal pending
        if pending is not None:
            losses.append(pending.item())
            pending = None

    for step in range(first_step, args.steps):
        if limit is not None and step > first_step and time.time() >= limit:
            settle()
            optimizer_state = optimizer.state_dict()
            if args.compact_state:
                optimizer_state = compact_moments(optimizer_state)
            save_state(args.state_dir, {
                "step": step, "settings": settings, "model": model.state_dict(), "optimizer": optimizer_state,
                "schedule": schedule.state_dict(), "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                "order": order, "cursor": cursor, "losses": losses, "train_seconds": time.time() - start})
            print(f"paused at step {step} of {args.steps} ({time.time() - start:.0f} s of training); the state is in "
                  f"{args.state_dir}: run the same command again to continue", flush=True)
            return PAUSED
        if cursor + args.batch_size > len(order):
            order, cursor = rng.permutation(args.scenes), 0
        rows = order[cursor:cursor + args.batch_size]
        cursor += args.batch_size
        loss = train_step(model, optimizer, rows, codes, prompts, layout, rng, device, precision, code_weights)
        # The previous step's loss is read while this one runs: the wait is for a step queued before this
        # one, so the clock the time limit reads is never more than a step behind.
        settle()
        pending = loss
        schedule.step()
        if step % args.log_every == 0 or step == args.steps - 1:
            settle()
            recent = float(np.mean(losses[-args.log_every:]))
            print(f"step {step:5d}  loss {recent:.4f}  lr {schedule.get_last_lr()[0]:.2e}  "
                  f"{time.time() - start:.0f} s", flush=True)
    train_seconds = time.time() - start

    write_hf_folder(args.out_dir, model, args.text_dir, layout)
    report = {"parameters": params, "arch": arch, "image_size": args.image_size, "scenes": args.scenes, "steps": args.steps,
              "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "threads": args.threads,
              "object_loss_weight": args.object_loss_weight, "background_variety": args.background_variety,
              "all_pairs": args.all_pairs,
              "device": args.device, "autocast": precision, "uncond_fraction": UNCOND_FRACTION, "init_from": args.init_from,
              "init_digest": init_digest, "vq_digest": settings["vq"], "finish_within": args.finish_within, "max_steps": max_steps,
              "probe_seconds_per_step": None if probe_seconds is None else round(probe_seconds, 5),
              "final_loss": round(float(np.mean(losses[-20:])), 4),
              "encode_seconds": round(encode_seconds, 1), "train_seconds": round(train_seconds, 1)}
    with open(os.path.join(args.out_dir, "train_report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out_dir}: final loss {report['final_loss']}, {train_seconds:.0f} s training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
