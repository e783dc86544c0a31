#!/usr/bin/env python3
"""Trains the default model's image tokenizer: a Chameleon (taming) VQGAN at small width.

  scripts/train_vq.py --out-dir work/vq [--steps 1200] [--seed 0] [--threads 1] [--autocast auto|bf16|off]

Writes the release formats of Meta's Chameleon tokenizer: `vqgan.ckpt` (a pickle
holding {"state_dict": ...} with the keys encoder.*, quant_conv.*, quantize.embedding.weight,
post_quant_conv.*, decoder.*) and `vqgan.yaml` (taming's VQModel config), plus
`vq_report.json` with the held-out reconstruction PSNR and the wall time.

The encoder and decoder are taming's architecture (sjd decodes with lib/vq/chameleon_vqgan.cpp).
Training is a plain VQ autoencoder on scenes.py images: mean squared error (objects
weighted up, OBJECT_WEIGHT) plus the
codebook and commitment terms, codes compared by cosine (the codebook is stored
unit-length, so the plain nearest-neighbour lookup of the release format finds the
same codes), unused codes restarted from encoder outputs. Deterministic for a given
seed, thread count and precision (--autocast, training_precision.py).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402
import training_precision  # noqa: E402

# Small width: level channels 64, 64, 128 at 64, 32, 16 pixels (4x downsampling, 16x16 codes).
# GroupNorm has 32 groups: with 32 channels a group is one channel, and normalising it erases
# the colour of any flat region (a constant map normalises to zero), so the narrowest level has
# 64 channels. At 64 px that costs what 32 channels cost at 128 px.
CONFIG = {
    "embed_dim": 8,
    "n_embed": 512,
    "z_channels": 32,
    "resolution": scenes.IMAGE_SIZE,
    "in_channels": 3,
    "out_ch": 3,
    "ch": 64,
    "ch_mult": [1, 1, 2],
    "num_res_blocks": 1,
    "attn_resolutions": [],
}
COMMITMENT = 0.25
RESTART_EVERY = 10  # steps between restarts of unused codes (during the first 75% of training)
# The first steps train a plain autoencoder on the unit latents; the codebook then starts on
# those latents (all codes unused -> all restarted). A random codebook collapses to one code.
AUTOENCODER_WARMUP_FRACTION = 0.15
OBJECT_WEIGHT = 3.0
HELD_OUT_IMAGES = 64


class GroupNorm(nn.GroupNorm):
    """taming's GroupNorm(32, eps 1e-6). For training it is written out in elementwise ops and
    per-channel means: on a CPU with channels-last bf16 tensors that backward is ~2x faster than
    PyTorch's native one, which took two thirds of a training step."""

    def forward(self, x):
        if not torch.is_grad_enabled():
            return super().forward(x.float())
        b, c = x.shape[:2]
        xf = x.float()
        per_group = c // self.num_groups
        mean = xf.mean((2, 3)).view(b, self.num_groups, per_group).mean(-1)
        mean_square = xf.square().mean((2, 3)).view(b, self.num_groups, per_group).mean(-1)
        rstd = torch.rsqrt((mean_square - mean.square()).clamp_min(0.0) + self.eps)
        scale = rstd.repeat_interleave(per_group, 1) * self.weight
        shift = self.bias - mean.repeat_interleave(per_group, 1) * scale
        return xf * scale[:, :, None, None] + shift[:, :, None, None]


def group_norm(channels):
    return GroupNorm(32, channels, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1, self.conv1 = group_norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = group_norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        # Residual branches start at zero, so the deep network starts as a shallow one and
        # learns in the few hundred steps a CPU allows.
        nn.init.zeros_(self.conv2.weight)
        nn.init.zeros_(self.conv2.bias)
        if cin != cout:
            self.nin_shortcut = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(x))))))
        return (self.nin_shortcut(x) if hasattr(self, "nin_shortcut") else x) + h


class AttnBlock(nn.Module):
    """Single-head self-attention over all positions, 1x1 convs, scale 1/sqrt(C)."""

    def __init__(self, channels):
        super().__init__()
        self.norm = group_norm(channels)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(channels, channels, 1) for _ in range(4))
        nn.init.zeros_(self.proj_out.weight)
        nn.init.zeros_(self.proj_out.bias)

    def forward(self, x):
        b, c, h, w = x.shape
        n = self.norm(x)
        q, k, v = (t.flatten(2).transpose(1, 2) for t in (self.q(n), self.k(n), self.v(n)))
        out = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj_out(out.transpose(1, 2).reshape(b, c, h, w))


class Downsample(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)))  # taming pads right and bottom only


class Upsample(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Mid(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.block_1, self.attn_1, self.block_2 = ResnetBlock(channels, channels), AttnBlock(channels), ResnetBlock(
            channels, channels)

    def forward(self, x):
        return self.block_2(self.attn_1(self.block_1(x)))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        ch, mult = c["ch"], c["ch_mult"]
        self.conv_in = nn.Conv2d(c["in_channels"], ch, 3, padding=1)
        self.down = nn.ModuleList()
        channels = ch
        for level, m in enumerate(mult):
            stage = nn.Module()
            stage.block = nn.ModuleList()
            for _ in range(c["num_res_blocks"]):
                stage.block.append(ResnetBlock(channels, ch * m))
                channels = ch * m
            stage.attn = nn.ModuleList()
            if level != len(mult) - 1:
                stage.downsample = Downsample(channels)
            self.down.append(stage)
        self.mid = Mid(channels)
        self.norm_out = group_norm(channels)
        self.conv_out = nn.Conv2d(channels, c["z_channels"], 3, padding=1)

    def forward(self, x):
        h = self.conv_in(x)
        for stage in self.down:
            for block in stage.block:
                h = block(h)
            if hasattr(stage, "downsample"):
                h = stage.downsample(h)
        return self.conv_out(F.silu(self.norm_out(self.mid(h))))


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        ch, mult = c["ch"], c["ch_mult"]
        channels = ch * mult[-1]
        self.conv_in = nn.Conv2d(c["z_channels"], channels, 3, padding=1)
        self.mid = Mid(channels)
        stages = [None] * len(mult)
        for level in reversed(range(len(mult))):
            stage = nn.Module()
            stage.block = nn.ModuleList()
            for _ in range(c["num_res_blocks"] + 1):
                stage.block.append(ResnetBlock(channels, ch * mult[level]))
                channels = ch * mult[level]
            stage.attn = nn.ModuleList()
            if level != 0:
                stage.upsample = Upsample(channels)
            stages[level] = stage
        self.up = nn.ModuleList(stages)
        self.norm_out = group_norm(channels)
        self.conv_out = nn.Conv2d(channels, c["out_ch"], 3, padding=1)

    def forward(self, z):
        h = self.mid(self.conv_in(z))
        for stage in reversed(self.up):
            for block in stage.block:
                h = block(h)
            if hasattr(stage, "upsample"):
                h = stage.upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class Quantize(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.embedding = nn.Embedding(n, dim)
        nn.init.normal_(self.embedding.weight)


class VQModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.encoder = Encoder(c)
        self.quant_conv = nn.Conv2d(c["z_channels"], c["embed_dim"], 1)
        self.quantize = Quantize(c["n_embed"], c["embed_dim"])
        self.post_quant_conv = nn.Conv2d(c["embed_dim"], c["z_channels"], 1)
        self.decoder = Decoder(c)

    def codebook(self):
        return F.normalize(self.quantize.embedding.weight, dim=1)

    def encode(self, x):
        """Pixels [B, 3, H, W] in [-1, 1] -> (unit latents [B, D, h, w], codes [B, h, w])."""
        # Code choice in float32 even under bf16 autocast: nearby codes must not tie.
        z = F.normalize(self.quant_conv(self.encoder(x)).float(), dim=1)
        with torch.autocast(x.device.type, enabled=False):
            codes = torch.einsum("bdhw,nd->bnhw", z, self.codebook()).argmax(1)
        return z, codes

    def decode_codes(self, codes):
        e = self.codebook()[codes].permute(0, 3, 1, 2)
        return self.decoder(self.post_quant_conv(e))

    def forward(self, x, quantize=True):
        z, codes = self.encode(x)
        if not quantize:  # autoencoder warm-up: the decoder sees the unit latents themselves
            return self.decoder(self.post_quant_conv(z)), codes, z, torch.zeros(())
        e = self.codebook()[codes].permute(0, 3, 1, 2)
        vq_loss = F.mse_loss(e, z.detach()) + COMMITMENT * F.mse_loss(z, e.detach())
        quantized = z + (e - z).detach()  # straight-through gradient to the encoder
        return self.decoder(self.post_quant_conv(quantized)), codes, z, vq_loss

    def release_state_dict(self):
        """The state dict as Meta's checkpoint stores it: the codebook unit-length, so a plain lookup decodes."""
        state = {k: v.detach().cpu().clone() for k, v in self.state_dict().items()}
        state["quantize.embedding.weight"] = self.codebook().detach().cpu().clone()
        return state


def to_pixels(images):
    """uint8 [B, H, W, 3] -> float [B, 3, H, W] in [-1, 1]."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 127.5 - 1.0


def to_bytes(x):
    """[B, 3, H, W] in [-1, 1] -> uint8 [B, H, W, 3], truncating like sjd's and Chameleon's conversion."""
    return ((x.clamp(-1.0, 1.0) + 1.0) / 2.0 * 255.0).permute(0, 2, 3, 1).to(torch.uint8)


def psnr(a, b):
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean()
    return float("inf") if mse == 0 else 10.0 * math.log10(255.0 ** 2 / mse)


def training_batch(seed, step, batch_size):
    """The step-th batch of training-split scenes: (pixels [B, 3, S, S], loss weights [B, 1, S, S])."""
    batch = [scenes.scene(seed, "train", i) for i in range(step * batch_size, (step + 1) * batch_size)]
    pixels = to_pixels(np.stack([scenes.render(s) for s in batch]))
    on_objects = torch.from_numpy(np.stack([
        np.any([scenes.object_mask(o) for o in s["objects"]], axis=0) for s in batch])).float()[:, None]
    # Objects and a pixel around them (their edges) weigh more: they are a small part of the
    # picture but all of what captions name besides the background.
    on_objects = F.max_pool2d(on_objects, 3, stride=1, padding=1)
    return pixels, 1.0 + OBJECT_WEIGHT * on_objects


@torch.no_grad()
def held_out_psnr(model, seed, device, count=HELD_OUT_IMAGES):
    """Mean PSNR (dB) of decode(encode(x)) over evaluation-split scenes, on uint8 pixels."""
    model.eval()
    values, used = [], set()
    for start in range(0, count, 16):
        originals = np.stack([scenes.render(scenes.scene(seed, "eval", i))
                              for i in range(start, min(count, start + 16))])
        _, codes = model.encode(to_pixels(originals).to(device))
        used.update(codes.flatten().tolist())
        recon = to_bytes(model.decode_codes(codes)).cpu().numpy()
        values += [psnr(o, r) for o, r in zip(originals, recon)]
    model.train()
    return float(np.mean(values)), len(used)


def restart_dead_codes(model, usage, latents, generator):
    """Codes unused since the last restart move onto random encoder outputs of this batch."""
    dead = (usage == 0).nonzero().flatten()
    if len(dead) == 0:
        return 0
    flat = latents.detach().float().permute(0, 2, 3, 1).reshape(-1, latents.shape[1])
    # Drawn on the CPU from the CPU generator: the same picks on every device.
    pick = torch.randint(len(flat), (len(dead),), generator=generator)
    noise = 0.01 * torch.randn(len(dead), flat.shape[1], generator=generator)
    with torch.no_grad():
        model.quantize.embedding.weight[dead.to(flat.device)] = flat[pick.to(flat.device)] + noise.to(flat.device)
    return len(dead)


def yaml_text(c):
    """taming's VQModel config, as Meta ships it next to vqgan.ckpt."""
    def seq(values):
        return "[" + ", ".join(str(v) for v in values) + "]"
    return (
        "model:\n"
        "  target: taming.models.vqgan.VQModel\n"
        "  params:\n"
        f"    embed_dim: {c['embed_dim']}\n"
        f"    n_embed: {c['n_embed']}\n"
        "    ddconfig:\n"
        "      double_z: false\n"
        f"      z_channels: {c['z_channels']}\n"
        f"      resolution: {c['resolution']}\n"
        f"      in_channels: {c['in_channels']}\n"
        f"      out_ch: {c['out_ch']}\n"
        f"      ch: {c['ch']}\n"
        f"      ch_mult: {seq(c['ch_mult'])}\n"
        f"      num_res_blocks: {c['num_res_blocks']}\n"
        f"      attn_resolutions: {seq(c['attn_resolutions'])}\n"
        "      dropout: 0.0\n"
    )


def load(out_dir):
    """The trained model back from vqgan.ckpt (for encoding the transformer's data)."""
    model = VQModel(CONFIG)
    state = torch.load(os.path.join(out_dir, "vqgan.ckpt"), map_location="cpu", weights_only=True)["state_dict"]
    model.load_state_dict(state)
    return model.eval()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="torch device to train on, e.g. cuda")
    parser.add_argument("--log-every", type=int, default=50)
    training_precision.add_argument(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    precision = training_precision.resolve(args.autocast, device)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    model = VQModel(CONFIG).to(device, memory_format=torch.channels_last)  # initialised on the CPU
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.99))
    warmup = max(1, min(100, args.steps // 10))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (
        1.0 + math.cos(math.pi * min(1.0, s / args.steps))))
    generator = torch.Generator().manual_seed(args.seed)
    # Counted where the codes are: a copy to the host every step would make a GPU wait for each batch.
    usage = torch.zeros(CONFIG["n_embed"], dtype=torch.long, device=device)
    quantize_from = int(args.steps * AUTOENCODER_WARMUP_FRACTION)
    start = time.time()
    for step in range(args.steps):
        batch, weight = training_batch(args.seed, step, args.batch_size)
        batch, weight = batch.to(device).contiguous(memory_format=torch.channels_last), weight.to(device)
        # sjd decodes in float32 whatever the training's precision (training_precision.py says which pays).
        with training_precision.autocast(precision, device):
            recon, codes, latents, vq_loss = model(batch, quantize=step >= quantize_from)
        rec_loss = ((recon.float() - batch).square() * weight).mean() / weight.mean()
        loss = rec_loss + vq_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        restarted = 0
        if step + 1 == quantize_from:
            usage.zero_()
            restarted = restart_dead_codes(model, usage, latents, generator)
        usage += torch.bincount(codes.flatten(), minlength=CONFIG["n_embed"])
        if step >= quantize_from and (step + 1) % RESTART_EVERY == 0 and step < args.steps * 0.75:
            restarted = restart_dead_codes(model, usage, latents, generator)
            usage.zero_()
        if step % args.log_every == 0 or step == args.steps - 1:
            batch_psnr = 10.0 * math.log10(4.0 / max(rec_loss.item(), 1e-12))
            print(f"step {step:5d}  weighted rec {rec_loss.item():.5f} (~{batch_psnr:.1f} dB)  vq {vq_loss.item():.4f}  "
                  f"restarted {restarted}  {time.time() - start:.0f} s", flush=True)
    train_seconds = time.time() - start

    mean_psnr, codes_used = held_out_psnr(model, args.seed, device)
    print(f"held-out PSNR {mean_psnr:.2f} dB over {HELD_OUT_IMAGES} evaluation scenes, {codes_used} codes used")
    torch.save({"state_dict": model.release_state_dict()}, os.path.join(args.out_dir, "vqgan.ckpt"))
    with open(os.path.join(args.out_dir, "vqgan.yaml"), "w", encoding="utf-8") as f:
        f.write(yaml_text(CONFIG))
    report = {"psnr_db": round(mean_psnr, 2), "held_out_images": HELD_OUT_IMAGES, "codes_used": codes_used,
              "steps": args.steps, "batch_size": args.batch_size, "seed": args.seed, "threads": args.threads,
              "device": args.device, "autocast": precision, "train_seconds": round(train_seconds, 1), "config": CONFIG}
    with open(os.path.join(args.out_dir, "vq_report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
