"""Parity of sjd's C++ Chameleon VQGAN decoder with an independent PyTorch one.

The reference below is a taming-transformers style decoder written from the
architecture description (not from sjd's code), at tiny width, with attention
at one resolution so every block kind runs. Its module names follow the
checkpoint's keys, so state_dict() yields exactly `quantize.embedding.weight`,
`post_quant_conv.*`, `decoder.*`. The test writes a fixture directory (weights,
codes, expected image) and runs the C++ side on it:
`$SJD_BUILD_DIR/tests/tests_vq "[fixture]"` with SJD_VQ_FIXTURE_DIR set.
"""
import json
import os
import pathlib
import subprocess

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn


def group_norm(channels):
    return nn.GroupNorm(num_groups=32, num_channels=channels, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1 = group_norm(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = group_norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.nin_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        skip = self.nin_shortcut(x) if self.nin_shortcut is not None else x
        return skip + h


class AttnBlock(nn.Module):
    def __init__(self, channels, scaled=True):
        super().__init__()
        self.norm = group_norm(channels)
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.proj_out = nn.Conv2d(channels, channels, 1)
        self.scaled = scaled  # False only for the deliberately wrong mutant

    def forward(self, x):
        b, c, h, w = x.shape
        n = self.norm(x)
        # One head over all h*w positions: [b, 1, hw, c].
        q, k, v = (t.flatten(2).transpose(1, 2).unsqueeze(1) for t in (self.q(n), self.k(n), self.v(n)))
        scale = None if self.scaled else 1.0
        out = F.scaled_dot_product_attention(q, k, v, scale=scale)
        return x + self.proj_out(out.squeeze(1).transpose(1, 2).reshape(b, c, h, w))


class Upsample(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Level(nn.Module):
    def __init__(self, blocks, attns, upsample):
        super().__init__()
        self.block = nn.ModuleList(blocks)
        self.attn = nn.ModuleList(attns)
        if upsample is not None:
            self.upsample = upsample


class Mid(nn.Module):
    def __init__(self, channels, scaled):
        super().__init__()
        self.block_1 = ResnetBlock(channels, channels)
        self.attn_1 = AttnBlock(channels, scaled)
        self.block_2 = ResnetBlock(channels, channels)


class Decoder(nn.Module):
    def __init__(self, cfg, scaled_attention=True):
        super().__init__()
        ch, mult = cfg["ch"], cfg["ch_mult"]
        channels = ch * mult[-1]
        self.conv_in = nn.Conv2d(cfg["z_channels"], channels, 3, padding=1)
        self.mid = Mid(channels, scaled_attention)
        levels = [None] * len(mult)
        side = cfg.get("resolution", 0) // 2 ** (len(mult) - 1)
        for level in reversed(range(len(mult))):
            out = ch * mult[level]
            blocks, attns = [], []
            for _ in range(cfg["num_res_blocks"] + 1):
                blocks.append(ResnetBlock(channels, out))
                channels = out
                if side in cfg["attn_resolutions"]:
                    attns.append(AttnBlock(out, scaled_attention))
            levels[level] = Level(blocks, attns, Upsample(out) if level != 0 else None)
            side *= 2
        self.up = nn.ModuleList(levels)
        self.norm_out = group_norm(channels)
        self.conv_out = nn.Conv2d(channels, cfg["out_channels"], 3, padding=1)

    def forward(self, z):
        h = self.conv_in(z)
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(h)))
        for level in reversed(range(len(self.up))):
            stage = self.up[level]
            for j, block in enumerate(stage.block):
                h = block(h)
                if len(stage.attn):
                    h = stage.attn[j](h)
            if hasattr(stage, "upsample"):
                h = stage.upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class Quantize(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.embedding = nn.Embedding(n, dim)


class VQGAN(nn.Module):
    def __init__(self, cfg, scaled_attention=True):
        super().__init__()
        self.quantize = Quantize(cfg["codebook_size"], cfg["embed_dim"])
        self.post_quant_conv = nn.Conv2d(cfg["embed_dim"], cfg["z_channels"], 1)
        self.decoder = Decoder(cfg, scaled_attention)

    @torch.no_grad()
    def decode_float(self, codes):
        """codes [H, W] int64 -> [3, H*ds, W*ds] float, before clamping."""
        z = self.quantize.embedding(codes).permute(2, 0, 1).unsqueeze(0)
        return self.decoder(self.post_quant_conv(z))[0]


def to_bytes(image):
    """[3, H, W] in [-1, 1] -> uint8 [H, W, 3], truncating like Chameleon's conversion."""
    return ((image.clamp(-1.0, 1.0) + 1.0) / 2.0 * 255.0).permute(1, 2, 0).to(torch.uint8)


# Tiny, with the attention at the middle level (side 16 of 32, 16, 8) so the
# order "upsample, then blocks with attention" is exercised; a non-square
# grid catches transposed axes.
FIXTURE_CONFIG = {
    "kind": "chameleon-vqgan", "weights": ["vqgan.safetensors"], "codebook_size": 64, "embed_dim": 4,
    "z_channels": 8, "ch": 32, "ch_mult": [1, 2, 2], "num_res_blocks": 1, "attn_resolutions": [16],
    "resolution": 32, "out_channels": 3, "downsample": 4,
}
GRID = (5, 7)


def random_reference(seed, scaled_attention=True):
    torch.manual_seed(seed)
    model = VQGAN(FIXTURE_CONFIG, scaled_attention).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embedding.weight"):
                p.normal_()
            elif ".norm" in name and name.endswith(".weight"):  # GroupNorm scales: near 1, not all 1
                p.normal_(1.0, 0.2)
            elif ".norm" in name:
                p.normal_(0.0, 0.2)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.1)
            # conv weights keep PyTorch's default (fan-in scaled) init
    return model


def write_fixture(directory, model, codes):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vq.json").write_text(json.dumps(FIXTURE_CONFIG))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "vqgan.safetensors"))
    expected_float = model.decode_float(codes)
    save_file({"codes": codes.contiguous(), "expected": to_bytes(expected_float).contiguous(),
               "expected_float": expected_float.contiguous()}, str(directory / "fixture.safetensors"))


def find_tests_vq():
    build = os.environ.get("SJD_BUILD_DIR")
    if not build:
        pytest.skip("SJD_BUILD_DIR is not set (CTest sets it): no C++ decoder to compare with")
    for candidate in (pathlib.Path(build) / "tests" / "tests_vq", pathlib.Path(build) / "tests_vq"):
        if candidate.exists():
            return candidate
    pytest.fail(f"tests_vq not found under {build}: build the tests_vq target first")


def run_fixture(binary, directory):
    env = dict(os.environ, SJD_VQ_FIXTURE_DIR=str(directory))
    result = subprocess.run([str(binary), "[fixture]"], env=env, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    print(output)
    return result.returncode, output


def test_state_dict_has_the_checkpoint_key_layout():
    # The fixture is only meaningful if its names are the real checkpoint's.
    keys = set(random_reference(0).state_dict())
    for key in ["quantize.embedding.weight", "post_quant_conv.weight", "decoder.conv_in.bias",
                "decoder.mid.block_1.norm1.weight", "decoder.mid.attn_1.proj_out.weight",
                "decoder.up.2.block.0.conv2.weight", "decoder.up.0.block.0.nin_shortcut.weight",
                "decoder.up.1.attn.1.q.weight", "decoder.up.1.upsample.conv.weight",
                "decoder.norm_out.bias", "decoder.conv_out.weight"]:
        assert key in keys, key
    assert not any(k.startswith("decoder.up.0.upsample") for k in keys)
    assert not any(".attn." in k and not k.startswith("decoder.up.1.") for k in keys)


def test_cpp_decoder_matches_reference(tmp_path):
    binary = find_tests_vq()
    model = random_reference(seed=1)
    codes = torch.randint(FIXTURE_CONFIG["codebook_size"], GRID, generator=torch.Generator().manual_seed(2))
    write_fixture(tmp_path / "fixture", model, codes)
    code, output = run_fixture(binary, tmp_path / "fixture")
    assert code == 0, output
    # The case really compared something (it fails when the variable is missing).
    assert "float max abs error" in output and "SJD_VQ_FIXTURE_DIR is not set" not in output
    assert "All tests passed" in output


def test_cpp_decoder_disagrees_with_a_wrong_reference(tmp_path):
    # A reference without attention scaling must make the comparison fail:
    # proves the fixture check can see a one-constant mistake.
    binary = find_tests_vq()
    right, wrong = random_reference(seed=3), random_reference(seed=3, scaled_attention=False)
    codes = torch.randint(FIXTURE_CONFIG["codebook_size"], GRID, generator=torch.Generator().manual_seed(4))
    assert (to_bytes(wrong.decode_float(codes)).int() - to_bytes(right.decode_float(codes)).int()).abs().max() > 1
    # Write the right weights with the wrong model's expected image.
    write_fixture(tmp_path / "fixture", wrong, codes)
    code, output = run_fixture(binary, tmp_path / "fixture")
    assert code != 0, output
    assert "FAILED" in output
