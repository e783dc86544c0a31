"""The default model's two training stages on a GPU (toy size, two steps each): a file of its own, skipped as a
whole where there is no CUDA device, so that CTest reports the skip (tests/python/conftest.py).
"""
import json

import pytest
import torch
from safetensors.torch import load_file

from training_stages import train_default_model, train_vq

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)


def test_both_stages_train_on_a_gpu(stages, tmp_path):
    assert train_vq.main(["--out-dir", str(tmp_path / "vq"), "--steps", "2", "--batch-size", "2",
                          "--device", "cuda"]) == 0
    assert train_default_model.main(["--vq-dir", str(tmp_path / "vq"), "--text-dir", str(stages / "text"),
                                     "--out-dir", str(tmp_path / "hf"), "--scenes", "24", "--steps", "2",
                                     "--batch-size", "2", "--device", "cuda"]) == 0
    weights = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert all(t.device.type == "cpu" and torch.isfinite(t.float()).all() for t in weights.values())
    assert json.loads((tmp_path / "vq" / "vq_report.json").read_text())["device"] == "cuda"
