#!/usr/bin/env python3
"""Which BLAS kernels serve the default model's small f32 products on this CPU.

The default model's AR step multiplies 2 rows (a CFG pair) by each weight, and a batch of 8 prompts 16 rows;
attention multiplies each head's cached keys by one query. On some machines the MKL inside LibTorch runs its
generic kernels (`perf` names `mkl_blas_def_*`), which this shows as torch far behind numpy's OpenBLAS at few
rows. Fastest mean of 5 rounds of N calls at one thread (set OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1).

  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python3 scripts/bench_small_products.py [--calls 20000]
"""
import argparse
import time

import numpy as np
import torch

PRODUCTS = [  # (label, left shape, right shape)
    ("[1, 256] x [256, 704]", (1, 256), (256, 704)),
    ("[2, 256] x [256, 704] (an AR step's CFG pair)", (2, 256), (256, 704)),
    ("[16, 256] x [256, 704] (B = 8)", (16, 256), (256, 704)),
    ("[600, 64] x [64] (one head's attention scores)", (600, 64), (64,)),
]


def fastest_us(fn, calls):
    for _ in range(100):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, numpy {np.__version__}; microseconds per product, fastest of 5 x {args.calls}")
    print("| product (f32) | torch (MKL) | numpy (OpenBLAS) |")
    print("|---|---|---|")
    for label, left, right in PRODUCTS:
        a = rng.standard_normal(left, dtype=np.float32)
        b = rng.standard_normal(right, dtype=np.float32)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        print(f"| {label} | {fastest_us(lambda: ta @ tb, args.calls):.1f} us | "
              f"{fastest_us(lambda: a @ b, args.calls):.1f} us |")


if __name__ == "__main__":
    main()
