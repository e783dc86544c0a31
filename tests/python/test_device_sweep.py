"""scripts/device_sweep.sh on the CPU at toy size: candidates trained one after another and their
bundles made here, what is already in OUT_DIR counted, and bad candidate lines and settings refused
by name. Its time limits are test_device_sweep_limits.py's.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from training_stages import SCRIPTS, sweep, stand_in_python


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
    ("CALL_SECONDS", "9m", "CALL_SECONDS must be whole seconds"),
    ("ENCODE_SECONDS", "-5", "ENCODE_SECONDS and VQ_SECONDS must be whole seconds"),
    ("VQ_SECONDS", "1.5", "ENCODE_SECONDS and VQ_SECONDS must be whole seconds"),
    ("CALL_SECONDS", "08", "CALL_SECONDS must be whole seconds"),
    ("ENCODE_SECONDS", "08", "ENCODE_SECONDS and VQ_SECONDS must be whole seconds"),
    ("VQ_SECONDS", "0", "ENCODE_SECONDS and VQ_SECONDS must be whole seconds"),
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
    assert run.returncode == 2 and message in run.stderr and "error token" not in run.stderr
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
