"""Fixtures of the default model's training tests: the toy text tokenizer and VQGAN (stages) and a
toy transformer run on them (hf_dir), made once per test file. The training modules are imported
inside them, so that the other Python tests here are collected without torch and its kin.

Under CTest (SJD_CTEST=1, one CTest entry per file) skipped tests are made visible: a file whose tests
all skipped prints the marker CTest reports as a skip (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt),
and a file that skipped some tests and ran others fails, since CTest would count it as passed whole.
"""
import os

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


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("SJD_CTEST") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", [])
    ran = sum(len(reporter.stats.get(outcome, [])) for outcome in ("passed", "failed", "error"))
    if not skipped:
        return
    reasons = sorted({str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
                      for report in skipped})
    if ran == 0:
        reporter.write_line("sjd-test-skipped: " + "; ".join(reasons))
    else:
        reporter.write_line(f"{len(skipped)} test(s) skipped in a file whose other tests ran: CTest would count the "
                            "file as passed; move them to a file of their own. Reasons: " + "; ".join(reasons))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
