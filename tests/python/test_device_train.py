"""scripts/device_train.sh on the CPU at toy size, as a GPU session calls it: a call that pauses and
a second one that finishes the bundle from the first's output, a carried tokenizer and VQGAN, a
VQGAN training that passes its time stopped, and a FROM_DIR or time setting that cannot be used refused.
"""
import json
import os
import shutil
import subprocess

from training_stages import SCRIPTS, stand_in_python


def test_device_train_pauses_and_a_second_call_from_its_output_finishes_the_bundle(tmp_path):
    # scripts/device_train.sh as a GPU session runs it, on the CPU at toy size: the first call has no time
    # left and pauses the transformer after a step; the second resumes from the first's packed output and
    # exports the bundle. Each call's output is what a device machine brings back: at most 8 files.
    script = SCRIPTS / "device_train.sh"
    # VQ_SECONDS: the toy VQGAN's two steps and evaluation took 60-70 s on a 2-core VM (2026-11-29), past the
    # 60 s floor a call of no time gives it; its time limit has a test of its own below.
    env = dict(os.environ, DEVICE="cpu", VQ_STEPS="2", LM_SCENES="24", LM_STEPS="2", LM_BATCH="2",
               CALL_SECONDS="0", VQ_SECONDS="600", OMP_NUM_THREADS="1")
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


def test_device_train_refuses_a_from_dir_without_parts(tmp_path):
    run = subprocess.run([str(SCRIPTS / "device_train.sh"), str(tmp_path / "out"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "holds no train.tar.gz.part*" in run.stderr
    assert not (tmp_path / "out").exists()


def test_device_train_stops_a_vqgan_training_that_passes_its_time(tmp_path):
    # Without a carried VQGAN the call trains one, which cannot pause: one that never ends is stopped at
    # VQ_SECONDS (timeout's 124 in the summary) and the call fails with nothing trained after it.
    env = dict(os.environ, DEVICE="cpu", CALL_SECONDS="0", OMP_NUM_THREADS="1", WORK=str(tmp_path / "work"),
               PYTHON=stand_in_python(tmp_path), STAND_IN_SLOW_VQ="1", VQ_SECONDS="3")
    run = subprocess.run([str(SCRIPTS / "device_train.sh"), str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=120, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "vq: " in summary and "exit 124" in summary and "== transformer" not in run.stdout
    for name, value in (("CALL_SECONDS", "08"), ("VQ_SECONDS", "0")):
        bad = subprocess.run([str(SCRIPTS / "device_train.sh"), str(tmp_path / "out2")], capture_output=True,
                             text=True, timeout=60, env=dict(env, **{name: value}))
        assert bad.returncode == 2 and f"{name} must be whole seconds" in bad.stderr
