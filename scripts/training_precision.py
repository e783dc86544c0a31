"""The arithmetic the default model's training scripts compute in: bf16 autocast or plain float32.

bf16 autocast pays only where the hardware multiplies bf16 itself: a GPU, or a CPU with AVX512-BF16
(about 2.5x float32's speed on the Intel Xeon the default model was first trained on). A CPU without it
emulates every bf16 product: on a 2-core AMD EPYC with AVX2 only, a training step of the default transformer
took 4.3 s under bf16 autocast against 0.59 s in float32 (docs/benchmarks.md, "Training precision"). "auto"
therefore takes bf16 where it is native and float32 elsewhere; the choice is one of the settings a
saved training state must match, since it changes the weights.
"""
import torch

CHOICES = ("auto", "bf16", "off")


def add_argument(parser):
    parser.add_argument("--autocast", choices=CHOICES, default="auto",
                        help="bf16: bf16 autocast; off: float32 throughout; auto (default): bf16 on a GPU and on CPUs "
                             "with AVX512-BF16, float32 on other CPUs (which would emulate bf16, several times slower)")


def cpu_has_native_bf16():
    probe = getattr(getattr(torch, "cpu", None), "_is_avx512_bf16_supported", None)
    if probe is not None:
        return bool(probe())
    try:  # torch without the probe: the kernel's CPU flags say the same
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and "avx512_bf16" in line.split() for line in f)
    except OSError:
        return False


def resolve(choice, device):
    """'bf16' or 'off' for a --autocast choice on a torch.device."""
    if choice not in CHOICES:
        raise ValueError(f"--autocast must be one of {', '.join(CHOICES)} (got {choice!r})")
    if choice != "auto":
        return choice
    return "bf16" if device.type != "cpu" or cpu_has_native_bf16() else "off"


def autocast(resolved, device):
    """The autocast context of a resolved choice ('off' leaves every operation in its own dtype)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=resolved == "bf16")
