#!/usr/bin/env python3
"""What the weight matmuls of one decoding step cost on their own.

A transformer step at batch 2 (one CFG pair) reads every weight once, so its
floor is weight bytes / memory bandwidth. This times only the step's matmuls
(fused qkv, o, fused gate/up, down for every layer, then lm_head) with random
bf16 weights of a bench preset's shapes, at the row counts of an AR step and of
window steps, with the weights stored [out, in] (F.linear, the layout sjd keeps
on a GPU) and [in, out] (x @ W), eager and replayed from a CUDA graph. Set
against `sjd bench`'s forward time, it says how much of a step is the matmuls
and how much everything else (attention, norms, RoPE, launches).

  python3 scripts/bench_matmul_floor.py --preset lumina-7b-768 [--rows 2,34,130] [--iterations 20]
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

# Must match lib/engine/bench_presets.cpp (as scripts/bench_eager_reference.py).
PRESETS = {
    "lumina-7b-768": dict(vocab=65536, hidden=4096, layers=32, heads=32, kv_heads=32, inter=11008),
    "emu3-8b-720": dict(vocab=184622, hidden=4096, layers=32, heads=32, kv_heads=8, inter=14336),
    "llamagen-xl-512": dict(vocab=16384, hidden=1280, layers=36, heads=20, kv_heads=20, inter=3584),
    "tiny": dict(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, inter=128),
}


def layer_shapes(p):
    """[out, in] of each matmul of one layer, as sjd fuses them."""
    head_dim = p["hidden"] // p["heads"]
    qkv = (p["heads"] + 2 * p["kv_heads"]) * head_dim
    return [(qkv, p["hidden"]), (p["hidden"], p["hidden"]), (2 * p["inter"], p["hidden"]), (p["hidden"], p["inter"])]


def timed_ms(fn, iterations):
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / iterations


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="lumina-7b-768", choices=sorted(PRESETS))
    parser.add_argument("--rows", default="2,34,130", help="rows per step: 2 = AR with CFG, 2(L+1) = a window")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_matmul_floor: no CUDA device", file=sys.stderr)
        return 2
    p = PRESETS[args.preset]
    dtype, device = torch.bfloat16, "cuda"
    shapes = layer_shapes(p) * p["layers"] + [(p["vocab"], p["hidden"])]
    out_in = [torch.randn(o, i, dtype=dtype, device=device) * 0.02 for o, i in shapes]
    in_out = [w.t().contiguous() for w in out_in]
    weight_bytes = sum(w.numel() for w in out_in) * 2
    print(f"preset {args.preset}: {len(shapes)} matmuls, {weight_bytes / 1e9:.2f} GB of bf16 weights, "
          f"{torch.cuda.get_device_name()}")
    print(f"{'rows':>5} {'layout':>7} {'eager ms':>9} {'graph ms':>9} {'graph GB/s':>11}")
    for rows in (int(r) for r in args.rows.split(",") if r):
        inputs = {i: torch.randn(rows, i, dtype=dtype, device=device) for _, i in shapes}
        for layout, weights in (("out,in", out_in), ("in,out", in_out)):
            def step():
                for (_, i), w in zip(shapes, weights):
                    F.linear(inputs[i], w) if layout == "out,in" else inputs[i] @ w
            eager = timed_ms(step, args.iterations)
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                step()  # warm-up on the capture stream (cuBLAS workspace)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                step()
            replayed = timed_ms(graph.replay, args.iterations)
            print(f"{rows:>5} {layout:>7} {eager:>9.3f} {replayed:>9.3f} {weight_bytes / replayed / 1e6:>11.0f}")
            del graph
    return 0


if __name__ == "__main__":
    sys.exit(main())
