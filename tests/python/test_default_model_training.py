"""The default model's training pipeline at toy size: text tokenizer -> VQGAN -> transformer -> export.

scripts/build_default_model.sh runs these same stages at full size (about three and a half
hours on two CPU cores). Here each runs a few steps, which is enough to check what the
shipped model relies on: every stage writes the release formats the Lumina-mGPT exporter
reads, the transformer's training is deterministic for a seed (bit-identical weights) and
changes with it, and the exported bundle loads and generates in sjd where it is built.
Pausing and resuming a run, the device scripts and the sweep have files of their own
(test_training_resume.py, test_device_train.py, test_device_sweep*.py), so that CTest runs
them side by side; the toy stages they share are conftest.py's fixtures.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from training_stages import (ROOT, SCRIPTS, code_novelty, scenes, train_default_model, train_text_tokenizer,
                             train_transformer, train_vq)


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


def test_scenes_drawn_by_several_processes_encode_to_the_same_codes(stages, tmp_path, monkeypatch):
    # A block boundary inside the scenes (64 of 70) and 3 drawing processes beside one encoding thread: the
    # codes are the one-process codes, in the same order (a draw that returned the images out of order is told
    # apart: the scenes differ). The thread count itself is part of the recipe (the encoder's sums).
    assert train_default_model.ENCODE_BLOCK % train_default_model.ENCODE_BATCH == 0  # blocks of whole batches
    monkeypatch.setattr(train_default_model, "ENCODE_BLOCK", 64)
    some = [scenes.scene(0, "train", i) for i in range(70)]
    def encode(workers, cache):
        monkeypatch.setattr(train_default_model, "drawing_workers", lambda device, threads: workers)
        return train_default_model.encode_scenes(str(stages / "vq"), some, 0, False, False, 64, str(cache), 1,
                                                 torch.device("cpu"), "off")[0]
    alone = encode(1, tmp_path / "one.npz")
    together = encode(3, tmp_path / "three.npz")
    assert alone.shape == (70, 16, 16) and np.array_equal(alone, together)
    assert not np.array_equal(alone[:35], alone[35:])
    with train_default_model.drawing_pool(3) as pool:
        drawn = train_default_model.draw_scenes(pool, some[:20], 64)
    assert all(np.array_equal(image, scenes.render(s, 64)) for image, s in zip(drawn, some[:20]))


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
