"""scripts/device_sweep.sh's time limits on the CPU at toy size: a candidate still running when the
call is up is stopped, and so are an encoding and a VQGAN training that pass their time.
"""
import re
import time

from training_stages import sweep, stand_in_python


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


def test_device_sweep_stops_a_vqgan_training_that_passes_its_time(stages, tmp_path):
    # Without a carried VQGAN the sweep trains one, for at most VQ_SECONDS: one that never ends is stopped
    # then, with the call's time still left to say so, and nothing is encoded or trained after it.
    out = tmp_path / "out"
    began = time.monotonic()
    run = sweep(out, tmp_path / "candidates.txt", tmp_path / "work", stages, 300,
                "a --image-size 64 --scenes 8 --steps 1\n", python=stand_in_python(tmp_path),
                VQ_DIR=str(tmp_path / "no-vq"), VQ_SECONDS="5", STAND_IN_SLOW_VQ="1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert time.monotonic() - began < 200  # the stopped training would hold it 600 s
    summary = (out / "sweep.txt").read_text()
    assert "VQGAN failed (or passed VQ_SECONDS=5)" in summary and "== a (" not in summary
    assert not (tmp_path / "work" / "codes-64").exists()
