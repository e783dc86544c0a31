"""Fixtures of the default model's training tests: the toy text tokenizer and VQGAN (stages) and a
toy transformer run on them (hf_dir), made once per test file.
"""
import pytest

from training_stages import train_text_tokenizer, train_transformer, train_vq


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    work = tmp_path_factory.mktemp("default_model")
    assert train_text_tokenizer.main(["--out-dir", str(work / "text"), "--captions", "2000"]) == 0
    assert train_vq.main(["--out-dir", str(work / "vq"), "--steps", "2", "--batch-size", "2"]) == 0
    return work


@pytest.fixture(scope="module")
def hf_dir(stages):
    assert train_transformer(stages, stages / "hf", 0) == 0
    return stages / "hf"
