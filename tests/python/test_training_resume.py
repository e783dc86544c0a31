"""The default model's transformer training across interruptions, at toy size: a run paused at its
time limit resumes to the same weights, a compact state resumes nearly so, a state is refused for
other settings, --init-from starts from an earlier run, and --finish-within trains what fits.
"""
import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from training_stages import train_default_model, train_transformer


def test_training_paused_at_its_time_limit_resumes_to_the_same_weights(stages, tmp_path):
    # --time-limit 0 pauses after every step that is not the first of its call: 4 steps take three paused
    # calls and a finishing one. 24 caption draws after the first pause make a lost random stream show.
    size = ("--steps", "4", "--batch-size", "8")
    assert train_transformer(stages, tmp_path / "straight", 0, *size) == 0
    state = tmp_path / "state"
    codes = [train_transformer(stages, tmp_path / "resumed", 0, *size, "--state-dir", str(state), "--time-limit", "0")
             for _ in range(4)]
    assert codes == [train_default_model.PAUSED] * 3 + [0]
    manifest = json.loads((state / "state.json").read_text())
    assert manifest["step"] == 3 and all(part["bytes"] <= train_default_model.STATE_PART_BYTES
                                         for part in manifest["parts"])
    assert sorted(p.name for p in state.iterdir()) == sorted(["state.json"] + [p["file"] for p in manifest["parts"]])
    straight = load_file(str(tmp_path / "straight" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert straight.keys() == resumed.keys() and all(torch.equal(straight[k], resumed[k]) for k in straight)
    report = lambda run: json.loads((tmp_path / run / "train_report.json").read_text())  # noqa: E731
    assert report("resumed")["final_loss"] == report("straight")["final_loss"]


def test_a_compact_training_state_is_smaller_and_resumes_nearly_as_the_straight_run(stages, tmp_path):
    size = ("--steps", "3", "--batch-size", "8")
    assert train_transformer(stages, tmp_path / "straight", 0, *size) == 0
    sizes, weights = {}, {}
    for name, extra in (("exact", ()), ("compact", ("--compact-state",)), ("fresh", ("--compact-state",))):
        state = tmp_path / name
        assert train_transformer(stages, tmp_path / f"{name}-hf", 0, *size, "--state-dir", str(state),
                                 "--time-limit", "0", *extra) == train_default_model.PAUSED
        sizes[name] = sum(part["bytes"] for part in json.loads((state / "state.json").read_text())["parts"])
        if name == "fresh":  # the broken variant: a resume that lost the optimiser's moments
            saved = train_default_model.load_state(str(state), json.loads((state / "state.json").read_text())["settings"])
            saved["optimizer"]["state"] = {}
            train_default_model.save_state(str(state), saved)
        while (code := train_transformer(stages, tmp_path / f"{name}-hf", 0, *size, "--state-dir", str(state),
                                         "--time-limit", "0", *extra)) == train_default_model.PAUSED:
            pass
        assert code == 0
        weights[name] = load_file(str(tmp_path / f"{name}-hf" / "model.safetensors"))
    assert sizes["compact"] < 0.75 * sizes["exact"]
    straight = load_file(str(tmp_path / "straight" / "model.safetensors"))

    def changed(run):  # the share of (bf16) weights that differ from the straight run's
        return sum(int((straight[k] != run[k]).sum()) for k in straight) / sum(t.numel() for t in straight.values())
    assert changed(weights["exact"]) == 0.0
    assert changed(weights["compact"]) < 0.3 < changed(weights["fresh"])  # measured: 0.08 and 0.86


def test_a_saved_training_state_is_refused_for_other_settings_or_altered_parts(stages, tmp_path, capsys):
    state = tmp_path / "state"
    assert train_transformer(stages, tmp_path / "hf", 0, "--state-dir", str(state), "--time-limit", "0") == \
        train_default_model.PAUSED
    capsys.readouterr()
    assert train_transformer(stages, tmp_path / "hf", 0, "--state-dir", str(state), "--lr", "1e-4") == 2
    assert re.search(r"state\.json: saved with other settings \(lr\)", capsys.readouterr().err)
    part = state / json.loads((state / "state.json").read_text())["parts"][0]["file"]
    data = bytearray(part.read_bytes())
    data[-1] ^= 1
    part.write_bytes(bytes(data))
    assert train_transformer(stages, tmp_path / "hf", 0, "--state-dir", str(state)) == 2
    assert f"{part.name}: its digest does not match" in capsys.readouterr().err
    # A state.json that is not one (cut short, or another file's JSON) is refused by name, not a traceback.
    manifest = state / "state.json"
    for text, reason in (("{\"step\": 1, \"sett", "not a readable saved state"),
                         ("[1, 2]", "not a saved state (no settings object or parts list)")):
        manifest.write_text(text)
        assert train_transformer(stages, tmp_path / "hf", 0, "--state-dir", str(state)) == 2
        assert f"state.json: {reason}" in capsys.readouterr().err


def test_init_from_starts_at_an_earlier_runs_weights_and_is_part_of_the_settings(stages, hf_dir, tmp_path, capsys):
    # At learning rate 0 (AdamW's decay scales with it) the written weights are the starting ones: the 64 px run's
    # exactly when initialised from it (its bf16 values survive the float32 round trip), the seed's own otherwise
    # (hf_dir trained two steps from that same seed's initialisation).
    frozen = ("--lr", "0", "--image-size", "128")
    assert train_transformer(stages, tmp_path / "warm", 0, *frozen, "--init-from", str(hf_dir)) == 0
    assert train_transformer(stages, tmp_path / "cold", 0, *frozen) == 0
    start = load_file(str(hf_dir / "model.safetensors"))
    warm = load_file(str(tmp_path / "warm" / "model.safetensors"))
    cold = load_file(str(tmp_path / "cold" / "model.safetensors"))
    assert start.keys() == warm.keys() and all(torch.equal(start[k], warm[k]) for k in start)
    assert not all(torch.equal(start[k], cold[k]) for k in start)
    assert json.loads((tmp_path / "warm" / "train_report.json").read_text())["init_from"] == str(hf_dir)

    assert train_transformer(stages, tmp_path / "narrow", 0, "--init-from", str(hf_dir), "--hidden-size", "128") == 2
    assert re.search(r"tensor \S+ has shape \[\d+(, \d+)?\], the model \[", capsys.readouterr().err)
    assert train_transformer(stages, tmp_path / "none", 0, "--init-from", str(tmp_path)) == 2
    assert "model.safetensors.index.json: missing" in capsys.readouterr().err
    altered = tmp_path / "altered"
    shutil.copytree(hf_dir, altered)
    save_file({k: v for k, v in start.items() if k != "lm_head.weight"}, str(altered / "model.safetensors"))
    assert train_transformer(stages, tmp_path / "x", 0, "--init-from", str(altered)) == 2
    assert "tensor lm_head.weight missing" in capsys.readouterr().err
    (altered / "tokenizer.json").write_text((altered / "tokenizer.json").read_text() + " ")
    assert train_transformer(stages, tmp_path / "x", 0, "--init-from", str(altered)) == 2
    assert "another tokenizer than --text-dir's" in capsys.readouterr().err
    # A paused warm-started run is not resumed as a cold one.
    state = tmp_path / "state"
    assert train_transformer(stages, tmp_path / "paused", 0, "--init-from", str(hf_dir), "--state-dir", str(state),
                             "--time-limit", "0") == train_default_model.PAUSED
    capsys.readouterr()
    assert train_transformer(stages, tmp_path / "paused", 0, "--state-dir", str(state)) == 2
    assert re.search(r"saved with other settings \(init_from\)", capsys.readouterr().err)
    # Nor a run on other data or with another loss: --background-variety, --all-pairs and --object-loss-weight are
    # settings too.
    for option, key in ((("--background-variety",), "background_variety"), (("--all-pairs",), "all_pairs"),
                        (("--object-loss-weight", "4"), "object_loss_weight")):
        state = tmp_path / f"state-{key}"
        assert train_transformer(stages, tmp_path / key, 0, *option, "--state-dir", str(state), "--time-limit",
                                 "0") == train_default_model.PAUSED
        capsys.readouterr()
        assert train_transformer(stages, tmp_path / key, 0, "--state-dir", str(state)) == 2
        assert re.search(rf"saved with other settings \({key}\)", capsys.readouterr().err)


def test_finish_within_trains_the_steps_that_fit_as_a_plain_run_of_that_many(stages, hf_dir, tmp_path, capsys):
    # Time enough: the most steps (--steps 2) fit, and the timed probe leaves the run as a plain --steps 2
    # run (the fixture's): same weights, bit for bit. No time: one step of at most 1000, trained as a plain
    # --steps 1 run is (its warm-up and schedule follow the steps chosen, not the most).
    def same_weights(a, b):
        a, b = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
        return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    assert train_transformer(stages, tmp_path / "ample", 0, "--finish-within", "600") == 0
    report = json.loads((tmp_path / "ample" / "train_report.json").read_text())
    assert report["steps"] == 2 and report["max_steps"] == 2 and report["probe_seconds_per_step"] > 0
    assert same_weights(tmp_path / "ample", hf_dir)
    assert train_transformer(stages, tmp_path / "none", 0, "--finish-within", "0.001", "--steps", "1000") == 0
    assert json.loads((tmp_path / "none" / "train_report.json").read_text())["steps"] == 1
    assert train_transformer(stages, tmp_path / "one", 0, "--steps", "1") == 0
    assert same_weights(tmp_path / "none", tmp_path / "one")
    with pytest.raises(SystemExit) as refused:
        train_transformer(stages, tmp_path / "both", 0, "--finish-within", "60", "--state-dir", str(tmp_path / "s"))
    assert refused.value.code == 2 and "--finish-within needs" in capsys.readouterr().err
