"""--autocast of the default model's training scripts: bf16 autocast where the hardware has bf16 arithmetic,
float32 elsewhere; the choice is recorded, keys the encoded scenes' cache, and a paused run resumes in it."""
import json

import pytest
import torch

from training_stages import train_default_model, train_transformer  # puts scripts/ on the import path
import training_precision  # noqa: E402 (from scripts/, after the line above)


@pytest.mark.parametrize("native, device, expected", [(True, "cpu", "bf16"), (False, "cpu", "off"),
                                                      (False, "cuda", "bf16"), (True, "cuda", "bf16")])
def test_auto_takes_bf16_only_where_it_is_native(monkeypatch, native, device, expected):
    monkeypatch.setattr(training_precision, "cpu_has_native_bf16", lambda: native)
    assert training_precision.resolve("auto", torch.device(device)) == expected
    # An explicit choice is kept whatever the hardware.
    assert training_precision.resolve("bf16", torch.device(device)) == "bf16"
    assert training_precision.resolve("off", torch.device(device)) == "off"
    with pytest.raises(ValueError, match="--autocast must be one of auto, bf16, off"):
        training_precision.resolve("fp16", torch.device(device))


def test_off_computes_in_float32_and_bf16_in_bfloat16():
    layer, x = torch.nn.Linear(8, 8), torch.randn(2, 8)
    with training_precision.autocast("off", torch.device("cpu")):
        assert layer(x).dtype == torch.float32
    with training_precision.autocast("bf16", torch.device("cpu")):
        assert layer(x).dtype == torch.bfloat16


def report(folder):
    return json.loads((folder / "train_report.json").read_text())


def weights_equal(a, b):
    from safetensors.torch import load_file
    a, b = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_precision_is_reported_changes_the_weights_and_keys_the_codes_cache(stages, tmp_path):
    folder = tmp_path / "hf"
    assert train_transformer(stages, folder, 0, "--autocast", "off") == 0
    assert report(folder)["autocast"] == "off" and report(folder)["encode_seconds"] > 0
    off = tmp_path / "off"
    folder.rename(off)
    folder.mkdir()
    (folder / "codes.npz").write_bytes((off / "codes.npz").read_bytes())
    # The cached codes were encoded in float32: a bf16 run encodes its own, and the next bf16 run reuses them.
    assert train_transformer(stages, folder, 0, "--autocast", "bf16") == 0
    assert report(folder)["autocast"] == "bf16" and report(folder)["encode_seconds"] > 0
    assert train_transformer(stages, folder, 0, "--autocast", "bf16") == 0
    assert report(folder)["encode_seconds"] == 0
    assert not weights_equal(off, folder)


def test_a_paused_run_resumes_in_its_own_precision_under_auto(stages, tmp_path, monkeypatch, capsys):
    # Paused under bf16 (a state such as every run saved before --autocast existed), resumed with the default
    # auto on a CPU that would choose float32: it finishes in bf16, as the straight bf16 run does.
    monkeypatch.setattr(training_precision, "cpu_has_native_bf16", lambda: False)
    size = ("--steps", "2")
    assert train_transformer(stages, tmp_path / "straight", 0, *size, "--autocast", "bf16") == 0
    state = tmp_path / "state"
    assert train_transformer(stages, tmp_path / "resumed", 0, *size, "--autocast", "bf16", "--state-dir", str(state),
                             "--time-limit", "0") == train_default_model.PAUSED
    assert "autocast" not in json.loads((state / "state.json").read_text())["settings"]
    capsys.readouterr()
    assert train_transformer(stages, tmp_path / "other", 0, *size, "--autocast", "off", "--state-dir",
                             str(state)) == 2
    assert "saved with other settings (autocast)" in capsys.readouterr().err
    assert train_transformer(stages, tmp_path / "resumed", 0, *size, "--state-dir", str(state)) == 0
    assert report(tmp_path / "resumed")["autocast"] == "bf16"
    assert weights_equal(tmp_path / "straight", tmp_path / "resumed")
