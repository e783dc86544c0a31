"""What the default model's training tests share: the scripts' folder on the import path, a toy
transformer run (train_transformer), and scripts/device_sweep.sh as those tests call it (sweep,
with stand_in_python to make a candidate hang or fail).
"""
import os
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

import code_novelty  # noqa: E402,F401 (re-exported to the tests)
import scenes  # noqa: E402,F401
import train_default_model  # noqa: E402
import train_text_tokenizer  # noqa: E402,F401
import train_vq  # noqa: E402,F401


def train_transformer(stages, out, seed, *extra):
    return train_default_model.main(["--vq-dir", str(stages / "vq"), "--text-dir", str(stages / "text"),
                                     "--out-dir", str(out), "--scenes", "24", "--steps", "2", "--batch-size", "2",
                                     "--seed", str(seed), *extra])


def sweep(out, candidates, work, stages, seconds, lines, python=sys.executable, **more_env):
    candidates.write_text(lines)
    env = dict(os.environ, DEVICE="cpu", CALL_SECONDS=str(seconds), WORK=str(work), THREADS="1",
               TEXT_DIR=str(stages / "text"), VQ_DIR=str(stages / "vq"), OMP_NUM_THREADS="1", PYTHON=python)
    env.update(more_env)
    return subprocess.run([str(SCRIPTS / "device_sweep.sh"), str(out), str(candidates)], capture_output=True,
                          text=True, timeout=600, env=env)


def stand_in_python(tmp_path):
    # python3 as the sweep calls it, except that a candidate's training run named "hang..." never ends, one
    # named "silent..." exits 0 without writing a model, and with STAND_IN_SLOW_ENCODE (STAND_IN_SLOW_VQ) set
    # the encoding (the VQGAN's training) never ends; the checks, the encoding and the others run for real.
    script = tmp_path / "python"
    script.write_text(f"""#!/usr/bin/env bash
case " $* " in
  *" --encode-only "*) [ -z "${{STAND_IN_SLOW_ENCODE:-}}" ] || exec sleep 600 ;;
  *"/train_vq.py "*) [ -z "${{STAND_IN_SLOW_VQ:-}}" ] || exec sleep 600 ;;
  *" --check-args "*) ;;
  *"/cand/hang"*) exec sleep 600 ;;
  *"/cand/silent"*) exit 0 ;;
esac
exec {shlex.quote(sys.executable)} "$@"
""")
    script.chmod(0o755)
    return str(script)
