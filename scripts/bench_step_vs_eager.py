#!/usr/bin/env python3
"""sjd's decoding step next to an eager PyTorch loop on the same bundle, side by side.

The reference is transformers' Chameleon built from the bundle's own Hugging Face
files (config.json + model.safetensors, as the parity tests load them), run eagerly
with a KV cache and both CFG rows in one batched forward -- the way a careful
Python implementation decodes. Both sides hold the cache at mid-image and time one
step for the same numbers of tokens per row (1 = an AR step, 1 + L = a window of
L drafts). sjd's side is `sjd bench --calibrate` (forward and logits pipeline,
fastest of the repetitions); the eager side is timed the same way (fastest),
forward and a softmax over the logits.

  OMP_NUM_THREADS=1 python3 scripts/bench_step_vs_eager.py --model models/default
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


def sjd_profile(sjd, model, iterations):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "profile.json"
        subprocess.run([str(sjd), "bench", "--calibrate", "--model", str(model), "--device", "cpu", "--dtype", "f32",
                        "--iterations", str(iterations), "--batch-sizes", "1", "--out", str(out)],
                       check=True, capture_output=True)
        return {t: ms for t, ms in json.loads(out.read_text())["curves"][0]["points"]}


def eager_model(model_dir):
    """The bundle's Chameleon config and transformer weights; its VQ model is not needed (and not in the file)."""
    from safetensors.torch import load_file
    from transformers import ChameleonConfig, ChameleonForConditionalGeneration

    model_dir = pathlib.Path(model_dir)
    model = ChameleonForConditionalGeneration(ChameleonConfig.from_pretrained(model_dir)).float().eval()
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    state = {}
    for shard in sorted(set(index["weight_map"].values())):
        state.update(load_file(model_dir / shard))
    params = dict(model.named_parameters())
    for name, tensor in state.items():  # Lumina keeps one qk-norm row for every head: broadcast it
        if name in params and tensor.shape != params[name].shape and tensor.shape[0] == 1:
            state[name] = tensor.expand(params[name].shape).clone()
    missing, unexpected = model.load_state_dict(state, strict=False)
    stray = [k for k in missing if not k.startswith("model.vqmodel")] + list(unexpected)
    if stray:
        raise SystemExit(f"{model_dir}: transformer weights do not fit the reference: {stray[:5]}")
    return model


def eager_steps(model, sizes, context, iterations):
    vocab = model.config.vocab_size
    index = torch.arange(context + max(sizes), dtype=torch.int64)
    tokens = torch.stack([(index * 7919 + offset) % vocab for offset in (1, 2)])  # the CFG pair
    times = {}
    with torch.inference_mode():
        cache = model(input_ids=tokens[:, :context], use_cache=True).past_key_values
        for width in sizes:
            best = float("inf")
            for _ in range(iterations + 2):
                start = time.perf_counter()
                logits = model(input_ids=tokens[:, context:context + width], past_key_values=cache,
                               use_cache=True).logits
                torch.softmax(logits.float(), -1)
                best = min(best, time.perf_counter() - start)
                cache.crop(-width)  # back to the mid-image context
            times[width] = best * 1e3
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "models" / "default"))
    parser.add_argument("--sjd", default=str(ROOT / "build" / "sjd"))
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()

    sjd = sjd_profile(args.sjd, args.model, args.iterations)
    model = eager_model(args.model)
    bundle = json.loads((pathlib.Path(args.model) / "bundle.json").read_text())
    layout = bundle["layout"]
    context = 40 + (layout["grid_height"] * (layout["grid_width"] + 1)) // 2  # prompt + half the image
    sizes = sorted(t for t in sjd if t <= 64)
    eager = eager_steps(model, sizes, context, args.iterations)
    print(f"bundle {args.model}: sjd step vs transformers {transformers_version()} eager Chameleon "
          f"({model.config._attn_implementation} attention), CPU f32, {torch.get_num_threads()} thread(s), "
          f"CFG batch 2, mid-image")
    print("tokens per row    sjd ms   eager ms   eager / sjd")
    for t in sizes:
        print(f"{t:14d} {sjd[t]:9.3f} {eager[t]:10.3f} {eager[t] / sjd[t]:12.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sjd_ms": {t: sjd[t] for t in sizes}, "eager_ms": eager, "context": context}, f, indent=2)
            f.write("\n")
    return 0


def transformers_version():
    import transformers
    return transformers.__version__


if __name__ == "__main__":
    sys.exit(main())
