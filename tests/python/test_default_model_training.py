"""The default model's training pipeline at toy size: text tokenizer -> VQGAN -> transformer -> export.

scripts/build_default_model.sh runs these same stages at full size (about three and a half
hours on two CPU cores). Here each runs a few steps, which is enough to check what the
shipped model relies on: every stage writes the release formats the Lumina-mGPT exporter
reads, the transformer's training is deterministic for a seed (bit-identical weights) and
changes with it, and the exported bundle loads and generates in sjd where it is built.
"""
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

import code_novelty  # noqa: E402
import scenes  # noqa: E402
import train_default_model  # noqa: E402
import train_text_tokenizer  # noqa: E402
import train_vq  # noqa: E402


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    work = tmp_path_factory.mktemp("default_model")
    assert train_text_tokenizer.main(["--out-dir", str(work / "text"), "--captions", "2000"]) == 0
    assert train_vq.main(["--out-dir", str(work / "vq"), "--steps", "2", "--batch-size", "2"]) == 0
    return work


def train_transformer(stages, out, seed, *extra):
    return train_default_model.main(["--vq-dir", str(stages / "vq"), "--text-dir", str(stages / "text"),
                                     "--out-dir", str(out), "--scenes", "24", "--steps", "2", "--batch-size", "2",
                                     "--seed", str(seed), *extra])


@pytest.fixture(scope="module")
def hf_dir(stages):
    assert train_transformer(stages, stages / "hf", 0) == 0
    return stages / "hf"


def test_text_tokenizer_has_chameleons_named_tokens_and_encodes_captions(stages):
    tokenizer = Tokenizer.from_file(str(stages / "text" / "tokenizer.json"))
    layout = json.loads((stages / "text" / "vocabulary.json").read_text())
    assert tokenizer.token_to_id("<s>") == layout["bos_id"]
    assert tokenizer.token_to_id("<racm3:break>") == layout["begin_image_id"]
    assert tokenizer.token_to_id("<reserved08799>") == layout["newline_id"]
    assert tokenizer.token_to_id("<reserved08802>") == layout["size_token_base"] + 2  # 64 px
    assert tokenizer.token_to_id("IMGIMGBAZ") == layout["image_token_first"] + 10
    caption = scenes.scene(0, "eval", 3)["caption"]
    ids = tokenizer.encode(caption, add_special_tokens=False).ids
    assert tokenizer.decode(ids) == caption
    assert len(ids) < len(caption) / 2  # merges learned from the captions, not bytes
    text_ids = [i for i in ids if i >= layout["image_token_first"] + layout["codebook_size"]]
    assert text_ids == ids  # captions never produce image or structure tokens


def test_vq_stage_writes_metas_release_files(stages):
    state = torch.load(stages / "vq" / "vqgan.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    assert {"encoder.conv_in.weight", "quant_conv.weight", "quantize.embedding.weight", "post_quant_conv.weight",
            "decoder.conv_out.weight"} <= set(state)
    assert list(state["quantize.embedding.weight"].shape) == [train_vq.CONFIG["n_embed"], train_vq.CONFIG["embed_dim"]]
    yaml = (stages / "vq" / "vqgan.yaml").read_text()
    assert "target: taming.models.vqgan.VQModel" in yaml and f"n_embed: {train_vq.CONFIG['n_embed']}" in yaml
    report = json.loads((stages / "vq" / "vq_report.json").read_text())
    assert report["steps"] == 2 and report["held_out_images"] > 0 and report["psnr_db"] > 0


def test_transformer_training_is_deterministic_for_a_seed(stages, hf_dir, tmp_path):
    assert train_transformer(stages, tmp_path / "same", 0, "--device", "cpu") == 0  # the default, said
    assert train_transformer(stages, tmp_path / "other", 1) == 0
    first = load_file(str(hf_dir / "model.safetensors"))
    same = load_file(str(tmp_path / "same" / "model.safetensors"))
    other = load_file(str(tmp_path / "other" / "model.safetensors"))
    assert all((first[k] == same[k]).all() for k in first)
    assert any(not (first[k] == other[k]).all() for k in first)
    # Again in the same folder, now with its encoded scenes cached (no VQGAN built): the same weights.
    assert (tmp_path / "same" / "codes.npz").exists()
    assert train_transformer(stages, tmp_path / "same", 0) == 0
    cached = load_file(str(tmp_path / "same" / "model.safetensors"))
    assert all(torch.equal(first[k], cached[k]) for k in first)
    assert json.loads((tmp_path / "same" / "train_report.json").read_text())["device"] == "cpu"


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


@pytest.mark.parametrize("grid", [16, 32])
def test_object_regions_hold_every_code_an_object_touches_and_little_else(grid):
    size = grid * train_default_model.DOWNSAMPLE
    train_scenes = [scenes.scene(3, "train", i) for i in range(40)]
    regions = train_default_model.object_regions(train_scenes, grid)
    for i, s in enumerate(train_scenes):
        touched, bound = np.zeros((grid, grid), dtype=bool), 0.0
        for o in s["objects"]:
            mask = scenes.object_mask(o, size).reshape(grid, size // grid, grid, size // grid)
            touched |= mask.any(axis=(1, 3))
            # in codes: the area of a disc reaching a patch's diagonal past the region's radius
            bound += np.pi * (train_default_model.OBJECT_REGION_RADII * scenes.SIZES[o["size"]] * grid + 2 ** 0.5) ** 2
        assert not (touched & ~regions[i]).any(), f"scene {i}: an object's code outside its region"
        assert touched.sum() < regions[i].sum() <= bound  # a margin (edges, a ring's hole), but near the objects
    assert 0.03 < regions.mean() < 0.3


def test_object_loss_weight_weighs_each_code_by_its_region(stages, hf_dir, tmp_path, capsys):
    _, layout = train_text_tokenizer.load(str(stages / "text"))
    rng = np.random.default_rng(0)
    codes = rng.integers(0, layout["codebook_size"], (3, 4, 4))
    code_weights = rng.integers(1, 9, (3, 4, 4)).astype(np.float32)
    prompts = [np.full(3 + i, layout["bos_id"]) for i in range(3)]  # prompts of different lengths
    ids, targets, weights = train_default_model.make_batch(np.array([2, 0]), codes, prompts, layout,
                                                           np.random.default_rng(1), code_weights)
    for b, row in enumerate([2, 0]):  # each target code carries the weight of its place in the grid
        keep = targets[b] >= 0
        assert torch.equal(targets[b][keep], torch.from_numpy(codes[row].reshape(-1)))
        assert torch.equal(weights[b][keep], torch.from_numpy(code_weights[row].reshape(-1)))
        assert (weights[b][~keep] == 0).all()
    # The loss is the weighted mean: weight 0 leaves a code out, equal weights are the plain mean.
    torch.manual_seed(0)
    model = train_default_model.ChameleonLM(dict(train_default_model.ARCH, hidden_size=32, num_attention_heads=2,
                                                 num_key_value_heads=2, intermediate_size=64), layout["vocab_size"])
    loss = lambda w=None: train_default_model.code_loss(model, ids, targets, layout, w).item()  # noqa: E731
    only_first = torch.zeros_like(weights)
    only_first[0] = weights[0]
    alone = train_default_model.make_batch(np.array([2]), codes, prompts, layout, np.random.default_rng(1),
                                           code_weights)
    assert loss(torch.where(targets >= 0, 3.0, 0.0)) == pytest.approx(loss(), rel=1e-5)
    assert loss(only_first) == pytest.approx(train_default_model.code_loss(model, *alone[:2], layout, alone[2]).item(),
                                             rel=1e-4)
    # Weight 1 is the plain loss, bit for bit (runs before the option existed); another weight trains otherwise.
    assert train_transformer(stages, tmp_path / "one", 0, "--object-loss-weight", "1") == 0
    assert train_transformer(stages, tmp_path / "four", 0, "--object-loss-weight", "4") == 0
    plain = load_file(str(hf_dir / "model.safetensors"))
    one = load_file(str(tmp_path / "one" / "model.safetensors"))
    four = load_file(str(tmp_path / "four" / "model.safetensors"))
    assert all(torch.equal(plain[k], one[k]) for k in one)
    assert not all(torch.equal(one[k], four[k]) for k in one)
    assert json.loads((tmp_path / "four" / "train_report.json").read_text())["object_loss_weight"] == 4
    with pytest.raises(SystemExit) as refused:
        train_transformer(stages, tmp_path / "x", 0, "--object-loss-weight", "0.5")
    assert refused.value.code == 2 and "--object-loss-weight must be a number >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("option, cache_key, report_key", [("--background-variety", "variety", "background_variety"),
                                                            ("--all-pairs", "all_pairs", "all_pairs")])
def test_other_scenes_train_on_their_own_codes(stages, hf_dir, tmp_path, option, cache_key, report_key):
    # cache_key is also scenes.scene's keyword for these scenes.
    # The variety and all-pairs scenes are other scenes (captions and pixels), so their codes are cached apart: a
    # plain run in the same folder afterwards encodes the plain scenes again and trains as the plain fixture did.
    # Two steps of 12 see all 24 scenes (all-pairs scenes differ from the plain ones in a few only), so the weights
    # must differ from a plain run's with the same batches.
    folder = tmp_path / "hf"
    assert train_transformer(stages, folder, 0, option, "--batch-size", "12") == 0
    other_codes = dict(np.load(folder / "codes.npz"))  # read now: the next run writes the file anew
    assert bool(other_codes[cache_key]) and json.loads((folder / "train_report.json").read_text())[report_key]
    assert train_transformer(stages, tmp_path / "plain12", 0, "--batch-size", "12") == 0
    plain12, other = (load_file(str(d / "model.safetensors")) for d in (tmp_path / "plain12", folder))
    assert not all(torch.equal(plain12[k], other[k]) for k in plain12)
    assert train_transformer(stages, folder, 0) == 0
    plain_codes = np.load(folder / "codes.npz")
    assert not bool(plain_codes[cache_key])
    assert np.array_equal(plain_codes["codes"], np.load(hf_dir / "codes.npz")["codes"])
    # The codes differ exactly where the scenes do (all-pairs scenes differ where a held-out pair was drawn).
    other_scenes = [i for i in range(24)
                    if scenes.scene(0, "train", i) != scenes.scene(0, "train", i, **{cache_key: True})]
    changed = np.flatnonzero((plain_codes["codes"] != other_codes["codes"]).any(axis=(1, 2)))
    assert other_scenes and changed.tolist() == other_scenes
    plain = load_file(str(hf_dir / "model.safetensors"))
    again = load_file(str(folder / "model.safetensors"))
    assert all(torch.equal(plain[k], again[k]) for k in plain)


def test_weights_past_the_shard_size_are_written_as_release_style_shards(stages, tmp_path, monkeypatch):
    monkeypatch.setattr(train_default_model, "SHARD_BYTES", 1024 * 1024)
    assert train_transformer(stages, tmp_path / "hf", 0) == 0
    index = json.loads((tmp_path / "hf" / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) > 1 and files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    assert not (tmp_path / "hf" / "model.safetensors").exists()
    names = set()
    for file in files:
        shard = load_file(str(tmp_path / "hf" / file))
        assert sum(t.nbytes for t in shard.values()) <= 1024 * 1024 or len(shard) == 1
        assert all(index["weight_map"][n] == file for n in shard)
        names |= set(shard)
    assert names == set(index["weight_map"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_both_stages_train_on_a_gpu(stages, tmp_path):
    assert train_vq.main(["--out-dir", str(tmp_path / "vq"), "--steps", "2", "--batch-size", "2",
                          "--device", "cuda"]) == 0
    assert train_default_model.main(["--vq-dir", str(tmp_path / "vq"), "--text-dir", str(stages / "text"),
                                     "--out-dir", str(tmp_path / "hf"), "--scenes", "24", "--steps", "2",
                                     "--batch-size", "2", "--device", "cuda"]) == 0
    weights = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert all(t.device.type == "cpu" and torch.isfinite(t.float()).all() for t in weights.values())
    assert json.loads((tmp_path / "vq" / "vq_report.json").read_text())["device"] == "cuda"


@pytest.mark.parametrize("size", [64, 128])
def test_export_script_turns_the_run_into_a_bundle_sjd_generates_with(stages, hf_dir, tmp_path, size):
    """At 64 px the shipped layout; at 128 px the same 64 px VQGAN (convolutional) gives 32 x 32 codes."""
    if size != 64:
        hf_dir = tmp_path / "hf"
        assert train_transformer(stages, hf_dir, 0, "--image-size", str(size)) == 0
        codes = np.load(hf_dir / "codes.npz")["codes"]
        assert codes.shape[1:] == (size // 4, size // 4)
        config = json.loads((hf_dir / "config.json").read_text())
        assert config["max_position_embeddings"] >= 32 * 33 + 5 + 128
    bundle_dir = tmp_path / "bundle"
    export = subprocess.run([str(SCRIPTS / "export_default_bundle.sh"), str(hf_dir), str(stages / "vq"), str(size),
                             str(bundle_dir)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHON=sys.executable))
    assert export.returncode == 0, export.stderr
    bundle = json.loads((bundle_dir / "bundle.json").read_text())
    assert bundle["layout"]["grid_height"] * bundle["layout"]["grid_width"] == (size // 4) ** 2
    # The defaults measured for the shipped models (docs/default_model.md).
    assert bundle["defaults"] == {"cfg": 1.5 if size == 64 else 1.25, "temperature": 1.0 if size == 64 else 0.8, "top_k": 128,
                                  "method": "sjd-pac", "init": "repeat-up"}
    # The VQGAN's own resolution is the side it trained at (it places attention blocks), not the image's.
    assert bundle["transformer"]["qk_norm"] and bundle["vq"]["resolution"] == scenes.IMAGE_SIZE

    sjd = pathlib.Path(os.environ.get("SJD_BUILD_DIR", ROOT / "build")) / "sjd"
    if not sjd.exists():
        pytest.skip("sjd is not built (set SJD_BUILD_DIR)")
    png = tmp_path / "scene.png"
    run = subprocess.run([str(sjd), "generate", "--model", str(bundle_dir), "-p", scenes.scene(0, "eval", 0)["caption"],
                          "-o", str(png), "--method", "sjd-pac", "--seed", "1"], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert run.returncode == 0, run.stderr
    assert f"({size}x{size})" in run.stdout and png.stat().st_size > 0


def test_device_train_pauses_and_a_second_call_from_its_output_finishes_the_bundle(tmp_path):
    # scripts/device_train.sh as a GPU session runs it, on the CPU at toy size: the first call has no time
    # left and pauses the transformer after a step; the second resumes from the first's packed output and
    # exports the bundle. Each call's output is what a device machine brings back: at most 8 files.
    script = SCRIPTS / "device_train.sh"
    env = dict(os.environ, DEVICE="cpu", VQ_STEPS="2", LM_SCENES="24", LM_STEPS="2", LM_BATCH="2",
               CALL_SECONDS="0", OMP_NUM_THREADS="1")
    first = subprocess.run([str(script), str(tmp_path / "first")], capture_output=True, text=True, timeout=600,
                           env=dict(env, WORK=str(tmp_path / "work1")))
    assert first.returncode == 75, first.stdout + first.stderr
    assert "paused at step 1 of 2" in (tmp_path / "first" / "summary.txt").read_text()
    second = subprocess.run([str(script), str(tmp_path / "second"), str(tmp_path / "first")], capture_output=True,
                            text=True, timeout=600, env=dict(env, WORK=str(tmp_path / "work2")))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "== text-tokenizer" not in second.stdout and "== vq" not in second.stdout  # reused from the first call
    for folder in ("first", "second"):
        files = list((tmp_path / folder).iterdir())
        assert len(files) <= 8 and all(f.is_file() and f.stat().st_size < 16 * 1024 * 1024 for f in files)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    parts = sorted((tmp_path / "second").glob("train.tar.gz.part*"))
    subprocess.run(["tar", "-xz", "-C", str(unpacked)], input=b"".join(p.read_bytes() for p in parts), check=True)
    assert "resumed from" in (unpacked / "transformer.log").read_text()
    bundle = json.loads((unpacked / "bundle" / "bundle.json").read_text())
    assert bundle["defaults"]["init"] == "repeat-up" and bundle["family"] == "lumina-mgpt"
    report = json.loads((unpacked / "hf" / "train_report.json").read_text())
    assert report["steps"] == 2 and report["all_pairs"]  # ALL_PAIRS defaults to v4's data
    # The work folder now belongs to this run: another setting must not continue its tokenizer, VQGAN or state.
    for setting in ({"LM_STEPS": "3"}, {"ALL_PAIRS": "0"}):
        other = subprocess.run([str(script), str(tmp_path / "third")], capture_output=True, text=True, timeout=60,
                               env=dict(env, WORK=str(tmp_path / "work2"), **setting))
        assert other.returncode == 2 and "made with other settings" in other.stderr
    bad = subprocess.run([str(script), str(tmp_path / "fourth")], capture_output=True, text=True, timeout=60,
                         env=dict(env, WORK=str(tmp_path / "work4"), ALL_PAIRS="2"))
    assert bad.returncode == 2 and "ALL_PAIRS must be 0 or 1" in bad.stderr


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


def sweep(out, candidates, work, stages, seconds, lines, python=sys.executable, **more_env):
    candidates.write_text(lines)
    env = dict(os.environ, DEVICE="cpu", CALL_SECONDS=str(seconds), WORK=str(work), THREADS="1",
               TEXT_DIR=str(stages / "text"), VQ_DIR=str(stages / "vq"), OMP_NUM_THREADS="1", PYTHON=python,
               **more_env)
    return subprocess.run([str(SCRIPTS / "device_sweep.sh"), str(out), str(candidates)], capture_output=True,
                          text=True, timeout=600, env=env)


def test_device_sweep_trains_each_candidate_and_the_bundles_are_made_here(stages, tmp_path):
    # scripts/device_sweep.sh as a GPU session runs it, on the CPU at toy size, with a carried tokenizer and
    # VQGAN: two candidates, the second on fewer scenes than the first (it reuses the encoded ones). Archive parts
    # of 4 MiB: the first candidate's (3.74 M parameters in bf16) comes back in two, as a real sweep's larger
    # ones do at 15 MiB, the second's in one archive.
    out, dest = tmp_path / "out", tmp_path / "dest"
    run = sweep(out, tmp_path / "candidates.txt", tmp_path / "work", stages, 400,
                "# toy candidates\n"
                "small --image-size 64 --batch-size 2 --steps 2 --scenes 24\r\n\n"  # a line as Windows ends it
                "narrow --image-size 64 --scenes 16 --batch-size 2 --steps 3 --hidden-size 64 --heads 2 "
                "--intermediate-size 128 --object-loss-weight 2  # a comment\n", PART_BYTES=str(4 << 20))
    assert run.returncode == 0, run.stdout + run.stderr
    summary = (out / "sweep.txt").read_text()
    assert "encoded 24 scenes at 64 px" in summary
    assert "== small (" in summary and "== narrow (" in summary and summary.count(": exit 0,") == 2
    assert sorted(f.name for f in out.iterdir()) == ["narrow.tar.gz", "small.tar.gz.part00", "small.tar.gz.part01",
                                                     "sweep.txt"]
    assert all(f.stat().st_size <= 4 << 20 for f in out.iterdir())

    (dest / "small").mkdir(parents=True)
    (dest / "small" / "stale.txt").write_text("from an earlier sweep")
    made = subprocess.run([str(SCRIPTS / "sweep_bundles.sh"), str(out), str(dest)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, VQ_DIR=str(stages / "vq"), PYTHON=sys.executable))
    assert made.returncode == 0, made.stdout + made.stderr
    assert not (dest / "small" / "stale.txt").exists()  # a candidate's folder is replaced, not merged
    for name, steps, hidden in (("small", 2, 256), ("narrow", 3, 64)):
        report = json.loads((dest / name / "hf" / "train_report.json").read_text())
        assert report["steps"] == steps and report["arch"]["hidden_size"] == hidden and report["finish_within"] > 0
        assert report["object_loss_weight"] == (2 if name == "narrow" else 1)
        assert report["all_pairs"]  # ALL_PAIRS defaults to the shipped model's data
        assert "encoded" not in (dest / name / "train.log").read_text()  # the sweep encoded them once
        bundle = json.loads((dest / name / "bundle" / "bundle.json").read_text())
        assert bundle["family"] == "lumina-mgpt" and bundle["defaults"]["init"] == "repeat-up"
        assert f"{name}/bundle: " in made.stdout and f"{steps} steps of 2" in made.stdout
    assert not list(dest.rglob("codes.npz"))  # the encoded scenes stay on the machine

    # Another VQGAN than the candidates were trained on is refused.
    other_vq = tmp_path / "other_vq"
    shutil.copytree(stages / "vq", other_vq)
    with open(other_vq / "vqgan.ckpt", "ab") as f:
        f.write(b"\0")
    wrong = subprocess.run([str(SCRIPTS / "sweep_bundles.sh"), str(out), str(tmp_path / "dest2")],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, VQ_DIR=str(other_vq), PYTHON=sys.executable))
    assert wrong.returncode == 2 and "trained on another VQGAN" in wrong.stderr

    # A broken archive is named and skipped; the others are still made. Files sweep.txt does not name are
    # not taken for candidates.
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    data = (broken / "narrow.tar.gz").read_bytes()
    (broken / "narrow.tar.gz").write_bytes(data[:len(data) // 2])
    small = b"".join(p.read_bytes() for p in sorted(broken.glob("small.tar.gz.part*")))
    (broken / "prebuilt.tar.gz").write_bytes(small)
    partial = subprocess.run([str(SCRIPTS / "sweep_bundles.sh"), str(broken), str(tmp_path / "dest3")],
                             capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, VQ_DIR=str(stages / "vq"), PYTHON=sys.executable))
    assert partial.returncode == 1 and "narrow.tar.gz (or its parts) is missing or does not unpack" in partial.stderr
    assert (tmp_path / "dest3" / "small" / "bundle" / "bundle.json").exists()
    assert sorted(p.name for p in (tmp_path / "dest3").iterdir()) == ["small"]


def test_device_sweep_with_no_time_left_says_so_and_exits_1(stages, tmp_path):
    # 40 s less the 30 kept for packing leave each of two candidates less than the start-up allowance.
    out = tmp_path / "out"
    run = sweep(out, tmp_path / "candidates.txt", tmp_path / "work", stages, 40,
                "a --image-size 64 --scenes 8 --batch-size 2 --steps 2\nb --image-size 64 --scenes 8 --steps 2\n")
    assert run.returncode == 1, run.stdout + run.stderr
    summary = (out / "sweep.txt").read_text()
    assert summary.count("exit 124") == 2 and summary.count("no time left") == 2
    assert sorted(f.name for f in out.iterdir()) == ["sweep.txt"]


def stand_in_python(tmp_path):
    # python3 as the sweep calls it, except that a candidate's training run named "hang..." never ends, one
    # named "silent..." exits 0 without writing a model, and with STAND_IN_SLOW_ENCODE set the encoding never
    # ends; the checks, the encoding and the others run for real.
    script = tmp_path / "python"
    script.write_text(f"""#!/usr/bin/env bash
case " $* " in
  *" --encode-only "*) [ -z "${{STAND_IN_SLOW_ENCODE:-}}" ] || exec sleep 600 ;;
  *" --check-args "*) ;;
  *"/cand/hang"*) exec sleep 600 ;;
  *"/cand/silent"*) exit 0 ;;
esac
exec {shlex.quote(sys.executable)} "$@"
""")
    script.chmod(0o755)
    return str(script)


def test_device_sweep_counts_what_is_already_in_out_dir_and_catches_a_run_without_a_model(stages, tmp_path):
    # Six files of the caller's own in OUT_DIR, sweep.txt and the first archive make the 8 files a call
    # brings back: the third candidate's archive is not kept, and sweep.txt says so. The second exits 0
    # without a model, which is a failure, not a candidate.
    out = tmp_path / "out"
    out.mkdir()
    for i in range(6):
        (out / f"mine{i}.txt").write_text("the caller's")
    run = sweep(out, tmp_path / "candidates.txt", tmp_path / "work", stages, 300,
                "first --image-size 64 --scenes 8 --batch-size 2 --steps 1\n"
                "silent --image-size 64 --scenes 8 --steps 1\n"
                "third --image-size 64 --scenes 8 --batch-size 2 --steps 1\n",
                python=stand_in_python(tmp_path), ALL_PAIRS="0")
    assert run.returncode == 1, run.stdout + run.stderr
    summary = (out / "sweep.txt").read_text()
    assert "kept first: " in summary and "== silent (" in summary and "exited 0 without writing a model" in summary
    with tarfile.open(out / "first.tar.gz") as archive:  # ALL_PAIRS=0: the scenes of v1-v3
        assert json.load(archive.extractfile("first/hf/train_report.json"))["all_pairs"] is False
    assert re.search(r"third: not kept: \d+ bytes in 1 file\(s\) would pass what comes back", summary)
    assert sorted(f.name for f in out.iterdir()) == ["first.tar.gz"] + [f"mine{i}.txt" for i in range(6)] + [
        "sweep.txt"]


def test_device_sweep_stops_a_candidate_when_the_call_is_up(stages, tmp_path):
    # 70 s, less 30 for packing, leave one share past the start-up allowance even on a busy machine: the
    # candidate that never ends is stopped when CALL_SECONDS are up (its share's minute of grace would end
    # about 30 s later), as timeout's 124.
    out = tmp_path / "out"
    run = sweep(out, tmp_path / "candidates.txt", tmp_path / "work", stages, 70,
                "hang --image-size 64 --scenes 8 --steps 1\n", python=stand_in_python(tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    summary = (out / "sweep.txt").read_text()
    assert "== hang (" in summary and ": exit 124," in summary and "no time left" not in summary
    assert int(re.search(r"device_sweep: (\d+) s in all", summary).group(1)) <= 75
    assert sorted(f.name for f in out.iterdir()) == ["sweep.txt"]


def test_device_sweep_stops_an_encoding_that_passes_its_time(stages, tmp_path):
    # Encoding the scenes may take ENCODE_SECONDS from the call's start: one that never ends is stopped then,
    # with the call's time still left to say so, and no candidate is started.
    out = tmp_path / "out"
    began = time.monotonic()
    run = sweep(out, tmp_path / "candidates.txt", tmp_path / "work", stages, 300,
                "a --image-size 64 --scenes 8 --steps 1\n", python=stand_in_python(tmp_path),
                ENCODE_SECONDS="5", STAND_IN_SLOW_ENCODE="1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert time.monotonic() - began < 200  # the stopped encoding would hold it 600 s
    summary = (out / "sweep.txt").read_text()
    assert "encoding failed (or passed ENCODE_SECONDS)" in summary and "== a (" not in summary


@pytest.mark.parametrize("lines, where, message", [
    ("a/b --image-size 64 --scenes 8", 2, "is not a candidate name"),
    ("--lr 1e-3 --image-size 64 --scenes 8", 2, "is not a candidate name"),
    ("vq --image-size 64 --scenes 8", 2, "is not a candidate name"),
    ("a --scenes 8", 2, "give --image-size and --scenes"),
    ("a --image-size 64 --scenes 8 --device cuda", 2, "--device is not a candidate flag"),
    ("a --image-size 64 --scenes 8 --seed=3", 2, "--seed=3 is not a candidate flag"),
    ("a --image-size=64 --scenes 8", 2, "--image-size=64 is not a candidate flag"),
    ("a --image-size 64 --scenes 8 --help", 2, "--help is not a candidate flag"),
    ("a --image-size 64 --scenes 8 --heads 3", 2, "is not a multiple of --heads 3"),
    ("a --image-size 64 --scenes 8 --lr -1", 2, "--lr must be a number >= 0"),
    ("a --image-size 64 --scenes 8 --object-loss-weight 0", 2, "--object-loss-weight must be a number >= 1"),
    ("a --image-size 64 --scenes 8 --background-variety x", 2, "--background-variety is not a candidate flag"),
    ("a --image-size 64 --scenes 8\na --image-size 64 --scenes 4", 3, "'a' is named twice"),
])
def test_device_sweep_names_a_bad_candidate_line(tmp_path, lines, where, message):
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("# candidates\n" + lines + "\n")
    run = subprocess.run([str(SCRIPTS / "device_sweep.sh"), str(tmp_path / "out"), str(candidates)],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHON=sys.executable, WORK=str(tmp_path / "work")))
    assert run.returncode == 2 and f"{candidates}:{where}: " in run.stderr and message in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, value, message", [
    ("CALL_SECONDS", "9m", "CALL_SECONDS and ENCODE_SECONDS must be whole seconds"),
    ("ENCODE_SECONDS", "-5", "CALL_SECONDS and ENCODE_SECONDS must be whole seconds"),
    ("PART_BYTES", "0", "PART_BYTES must be a whole number of bytes"),
    ("PART_BYTES", "15M", "PART_BYTES must be a whole number of bytes"),
    ("ALL_PAIRS", "yes", "ALL_PAIRS must be 0 or 1"),
])
def test_device_sweep_refuses_a_bad_setting_by_name(tmp_path, name, value, message):
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("a --image-size 64 --scenes 8\n")
    run = subprocess.run([str(SCRIPTS / "device_sweep.sh"), str(tmp_path / "out"), str(candidates)],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, WORK=str(tmp_path / "work"), **{name: value}))
    assert run.returncode == 2 and message in run.stderr
    assert not (tmp_path / "out").exists()


def test_device_sweep_leaves_a_work_folder_it_did_not_make(tmp_path):
    work = tmp_path / "mine"
    work.mkdir()
    (work / "notes.txt").write_text("keep me")
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("a --image-size 64 --scenes 8\n")
    run = subprocess.run([str(SCRIPTS / "device_sweep.sh"), str(tmp_path / "out"), str(candidates)],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, WORK=str(work)))
    assert run.returncode == 2 and "was not made by a sweep" in run.stderr
    assert (work / "notes.txt").read_text() == "keep me"
    # Nor may the work folder be the output folder (or hold it): its files would all be brought back.
    nested = subprocess.run([str(SCRIPTS / "device_sweep.sh"), str(tmp_path / "w" / "out"), str(candidates)],
                            capture_output=True, text=True, timeout=60, env=dict(os.environ, WORK=str(tmp_path / "w")))
    assert nested.returncode == 2 and "must not hold one another" in nested.stderr


def test_device_train_takes_a_carried_tokenizer_and_vqgan(stages, tmp_path):
    # TEXT_DIR and VQ_DIR (the sweep's carried ones): copied, not trained, and the state pauses as usual;
    # a VQ_DIR without its yaml is refused by name before anything is trained.
    env = dict(os.environ, DEVICE="cpu", LM_SCENES="24", LM_STEPS="2", LM_BATCH="2", CALL_SECONDS="0",
               OMP_NUM_THREADS="1", TEXT_DIR=str(stages / "text"), VQ_DIR=str(stages / "vq"))
    run = subprocess.run([str(SCRIPTS / "device_train.sh"), str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=600, env=dict(env, WORK=str(tmp_path / "work")))
    assert run.returncode == 75, run.stdout + run.stderr
    assert "== text-tokenizer" not in run.stdout and "== vq" not in run.stdout
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert f"text: carried from {stages / 'text'}" in summary and f"vq: carried from {stages / 'vq'}" in summary
    assert (tmp_path / "work" / "vq" / "vqgan.ckpt").read_bytes() == (stages / "vq" / "vqgan.ckpt").read_bytes()
    no_yaml = tmp_path / "no_yaml"
    no_yaml.mkdir()
    shutil.copy(stages / "vq" / "vqgan.ckpt", no_yaml)
    refused = subprocess.run([str(SCRIPTS / "device_train.sh"), str(tmp_path / "out2")], capture_output=True,
                             text=True, timeout=120, env=dict(env, WORK=str(tmp_path / "work2"), VQ_DIR=str(no_yaml)))
    assert refused.returncode == 2 and f"{no_yaml} has no vqgan.yaml" in refused.stderr


def test_code_novelty_counts_neighbour_pairs_the_training_codes_lack(stages, tmp_path, capsys):
    # Training codes that are the evaluation scenes' own: no pair is new. The same codes shifted by one: the
    # pairs differ, so some are new. Every object of the scenes is counted once, under its kind.
    vq = train_vq.load(stages / "vq")
    batch = [scenes.scene(0, "eval", i) for i in range(200, 206)]
    with torch.no_grad():
        _, codes = vq.encode(train_vq.to_pixels(np.stack([scenes.render(s, 64) for s in batch])))
    codes = codes.numpy().astype(np.int16)
    np.savez(tmp_path / "same.npz", codes=codes)
    np.savez(tmp_path / "shifted.npz", codes=(codes + 1) % 512)
    same, _ = code_novelty.novelty(stages / "vq", tmp_path / "same.npz", 64, 0, 200, 6)
    assert sum(kind[0] for kind in same.values()) == sum(len(s["objects"]) for s in batch)
    assert all(kind[1] > 0 and kind[2] == 0 and kind[3] == 0 for kind in same.values())
    assert all(kind[1] < kind[0] * 2 * 16 * 15 for kind in same.values())  # an object's pairs, not the image's
    assert any(kind.startswith("held-out ") for kind in same)
    shifted, _ = code_novelty.novelty(stages / "vq", tmp_path / "shifted.npz", 64, 0, 200, 6)
    assert {k: v[:2] for k, v in shifted.items()} == {k: v[:2] for k, v in same.items()}
    assert sum(kind[2] for kind in shifted.values()) > 0
    assert all(kind[3] == kind[0] for kind in shifted.values())  # every first code in a context never seen
    # An object's first cell: a large square on the left at 128 px has its top edge at y = 51.25 and its left edge at
    # x = 19.25, so cell row 12 holds one pixel row of it: (12, 4) a sixteenth, (12, 5) a quarter. A large triangle
    # there begins at its apex (x = 32) in row 12, the cell right of the apex a quarter or more; a tiny image's small
    # triangle fills no cell by a quarter and falls back on the first cell it touches.
    share = lambda o, size: scenes.object_mask(o, size).reshape(size // 4, 4, size // 4, 4).mean((1, 3))  # noqa
    square = {"size": "large", "colour": "red", "shape": "square", "position": "left"}
    assert code_novelty.first_cell(share(square, 128)) == (12, 5)
    assert code_novelty.first_cell(share({**square, "shape": "triangle"}, 128)) == (12, 7)
    tiny = share({**square, "size": "small", "shape": "triangle"}, 32)
    assert tiny.max() < 0.25 and tiny[code_novelty.first_cell(tiny)] > 0
    # The context of a cell: the code above, the code left (OUTSIDE past the edge) and its own.
    out = code_novelty.OUTSIDE
    contexts = code_novelty.first_code_contexts(np.array([[1, 2], [3, 4]]))
    assert contexts.tolist() == [[(out << 32) + (out << 16) + 1, (out << 32) + (1 << 16) + 2],
                                 [(1 << 32) + (out << 16) + 3, (2 << 32) + (3 << 16) + 4]]
    # Grids of another image size are refused by name (exit code 2), not compared.
    assert code_novelty.main(["--vq-dir", str(stages / "vq"), "--codes", str(tmp_path / "same.npz"),
                              "--image-size", "128", "--count", "6"]) == 2
    assert "same.npz holds 16 x 16 code grids, not the 32 x 32 of --image-size 128" in capsys.readouterr().err
    assert code_novelty.main(["--vq-dir", str(stages / "vq"), "--codes", str(tmp_path / "none.npz")]) == 2
    assert f"{tmp_path / 'none.npz'} is not a file" in capsys.readouterr().err


def test_device_train_refuses_a_from_dir_without_parts(tmp_path):
    run = subprocess.run([str(SCRIPTS / "device_train.sh"), str(tmp_path / "out"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "holds no train.tar.gz.part*" in run.stderr
    assert not (tmp_path / "out").exists()
