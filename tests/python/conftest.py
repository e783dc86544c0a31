"""Fixtures of the default model's training tests: the toy text tokenizer and VQGAN (stages) and a
toy transformer run on them (hf_dir), made once per test file. The training modules are imported
inside them, so that the other Python tests here are collected without torch and its kin.
"""
import pytest


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    from training_stages import train_text_tokenizer, train_vq
    work = tmp_path_factory.mktemp("default_model")
    assert train_text_tokenizer.main(["--out-dir", str(work / "text"), "--captions", "2000"]) == 0
    assert train_vq.main(["--out-dir", str(work / "vq"), "--steps", "2", "--batch-size", "2"]) == 0
    return work


@pytest.fixture(scope="module")
def hf_dir(stages):
    from training_stages import train_transformer
    assert train_transformer(stages, stages / "hf", 0) == 0
    return stages / "hf"
