"""export_bundle.py --weights-format torchscript: the same model as TorchScript archives.

A tiny Lumina-mGPT release (the fixture of test_lumina_export.py) is exported twice, as
safetensors and as TorchScript. `sjd generate` must refuse the TorchScript bundle without
--trust-code (loading an archive runs code) and, with it, draw exactly the tokens of the
safetensors bundle for the same seed.
"""
import json

import pytest

from test_lumina_export import export_with_vqgan, run_sjd, write_release


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    release = tmp_path_factory.mktemp("ts_release")
    write_release(release)
    plain, archived = tmp_path_factory.mktemp("ts_plain"), tmp_path_factory.mktemp("ts_archived")
    export_with_vqgan(release, plain)
    export_with_vqgan(release, archived, "--weights-format", "torchscript")
    return plain, archived


def test_the_torchscript_bundle_names_archives(bundles):
    _, archived = bundles
    bundle = json.loads((archived / "bundle.json").read_text())
    assert bundle["transformer"]["weights"] == ["model.pt"]
    assert bundle["vq"]["weights"] == ["vq.pt"]
    assert (archived / "model.pt").is_file() and (archived / "vq.pt").is_file()
    assert not (archived / "vqgan.safetensors").exists()


def test_torchscript_weights_need_trust_code(bundles, tmp_path):
    _, archived = bundles
    result = run_sjd("generate", "--model", archived, "-p", "a red fox", "-o", tmp_path / "a.png")
    assert result.returncode == 2
    assert "--trust-code" in result.stderr and "model.pt" in result.stderr
    assert not (tmp_path / "a.png").exists()


def test_torchscript_bundle_draws_the_same_tokens(bundles, tmp_path):
    plain, archived = bundles
    drawn = []
    for bundle, extra in ((plain, []), (archived, ["--trust-code"])):
        tokens = tmp_path / f"{bundle.name}.json"
        result = run_sjd("generate", "--model", bundle, "-p", "a red fox in the snow", "--seed", 3, "--method",
                         "sjd", "--resolution", 512, "-o", tmp_path / f"{bundle.name}.png", "--tokens", tokens,
                         *extra)
        assert result.returncode == 0, result.stderr
        drawn.append(json.loads(tokens.read_text()))
    assert len(drawn[0]) > 0
    assert drawn[0] == drawn[1]
