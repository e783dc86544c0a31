#!/usr/bin/env python3
"""PyTorch eager reference for `sjd bench`.

transformers' Chameleon built with a bench preset's shapes and the very same
hashed random weights as `sjd bench` (the weights checksum both print must
agree), CFG batch 2, cache filled to mid-image; times one-token steps (AR) and
(L+1)-token window steps with a KV cache, cropping the cache back after each.
Chameleon always has qk-norm and 1D RoPE: for Emu3 and LlamaGen shapes it is a
same-size stand-in, not their exact block.

  python3 scripts/bench_eager_reference.py --preset lumina-7b-768 --device cuda --dtype bf16 --json out.json
"""
import argparse
import json
import math
import sys
import time

import torch

# Must match lib/engine/bench_presets.cpp.
PRESETS = {
    "lumina-7b-768": dict(vocab=65536, hidden=4096, layers=32, heads=32, kv_heads=32, inter=11008, theta=1e4,
                          prompt=40, grid=48),
    "emu3-8b-720": dict(vocab=184622, hidden=4096, layers=32, heads=32, kv_heads=8, inter=14336, theta=1e6,
                        prompt=40, grid=90),
    "llamagen-xl-512": dict(vocab=16384, hidden=1280, layers=36, heads=20, kv_heads=20, inter=3584, theta=1e4,
                            prompt=120, grid=32),
    "tiny": dict(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, theta=1e4, prompt=8, grid=16),
}

# Must match lib/engine/bench_weights.cpp.
RANGE = 0.02 * 1.7320508075688772
CHUNK = 1 << 26
HASHED = ("embed_tokens.weight", "lm_head.weight", "_proj.weight")


def fnv1a(text):
    h = 2166136261
    for byte in text.encode():
        h ^= byte
        h = (h * 16777619) & 0xFFFFFFFF
    return h


def hashed_weight(name, shape, seed, dtype, device):
    n = math.prod(shape)
    out = torch.empty(n, dtype=dtype, device=device)
    salt = fnv1a(name) ^ (seed & 0xFFFFFFFF)
    for start in range(0, n, CHUNK):
        count = min(CHUNK, n - start)
        h = torch.arange(start, start + count, dtype=torch.int64, device=device)
        h = (h * 2654435761 + salt) & 0xFFFFFFFF
        h = h ^ (h >> 16)
        h = (h * 0x45D9F3B) & 0xFFFFFFFF
        h = h ^ (h >> 16)
        u = h.to(torch.float64) / 4294967296.0
        out[start:start + count].copy_((u * 2.0 - 1.0) * RANGE)
    return out.view(shape)


def build_model(p, seed, dtype, device):
    from transformers import ChameleonConfig, ChameleonForConditionalGeneration

    config = ChameleonConfig(
        vocab_size=p["vocab"], hidden_size=p["hidden"], intermediate_size=p["inter"],
        num_hidden_layers=p["layers"], num_attention_heads=p["heads"], num_key_value_heads=p["kv_heads"],
        max_position_embeddings=p["prompt"] + 2 * p["grid"] ** 2 + 256,
        rope_parameters={"rope_type": "default", "rope_theta": p["theta"]},
        vocabulary_map={"<image>": 8711},
        vq_config={"base_channels": 32, "channel_multiplier": [1, 1], "num_res_blocks": 1, "latent_channels": 8,
                   "embed_dim": 8, "num_embeddings": 16, "resolution": 32},
    )
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = ChameleonForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(default_dtype)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.startswith("model.vqmodel"):
                continue
            if name.endswith(HASHED):
                param.copy_(hashed_weight(name, tuple(param.shape), seed, dtype, device))
            elif name.endswith("bias"):
                param.zero_()
            else:  # RMSNorm and qk LayerNorm weights
                param.fill_(1.0)
    return model.eval()


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_ms(fn, device, iterations, warmup):
    for _ in range(warmup):
        fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3 / iterations


def token_rows(length, vocab, device):
    index = torch.arange(length, dtype=torch.int64)
    rows = [(index * 7919 + offset) % vocab for offset in (1, 2)]  # the CFG pair, as sjd bench
    return torch.stack(rows).to(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--windows", default="16,32,64")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()

    p = PRESETS[args.preset]
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    windows = [int(w) for w in args.windows.split(",") if w]
    model = build_model(p, args.seed, dtype, args.device)
    layer0 = model.model.layers[0].self_attn.q_proj.weight
    checksum = float(model.lm_head.weight.detach().double().sum() + layer0.detach().double().sum())

    context = p["prompt"] + p["grid"] ** 2 // 2  # mid-image, as sjd bench
    tokens = token_rows(context + max(windows) + 1, p["vocab"], args.device)
    result = {"preset": args.preset, "device": args.device, "dtype": args.dtype,
              "attention": model.config._attn_implementation, "weights_checksum": checksum,
              "context_tokens": context, "window_step_ms": {}}
    with torch.inference_mode():
        cache = model(input_ids=tokens[:, :context], use_cache=True).past_key_values

        def step(width):
            def run():
                model(input_ids=tokens[:, context:context + width], past_key_values=cache, use_cache=True)
                cache.crop(-width)  # back to the mid-image context
            return run

        result["ar_step_ms"] = timed_ms(step(1), args.device, args.iterations, args.warmup)
        for w in windows:
            result["window_step_ms"][str(w)] = timed_ms(step(w + 1), args.device, args.iterations, args.warmup)

    print(f"eager reference: transformers Chameleon ({result['attention']} attention), preset {args.preset}, "
          f"{args.device} {args.dtype}, CFG batch 2, {context} tokens of context")
    print(f"weights checksum: {checksum:.9f}")
    print(f"ar step: {result['ar_step_ms']:.3f} ms")
    for w, ms in result["window_step_ms"].items():
        print(f"window L={w}: {ms:.3f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
