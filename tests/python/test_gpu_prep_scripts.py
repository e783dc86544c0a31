"""The GPU machine's set-up scripts: scripts/unpack_deps.sh, and scripts/device_check.sh's argument checks,
time limits and the CTest suite it runs from a prebuilt folder.

unpack_deps.sh puts the gathered .deb files into a prefix folder on a machine without our packages; it must
never write into / and must refuse a prefix whose symbolic links lead out of it (a -dev package's libfoo.so
pointing at a runtime library that was not gathered would silently link the system's copy, or nothing).
device_check.sh runs on the GPU machine, where a mistyped stage must fail at once rather than after a build.
"""
import pathlib
import platform
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNPACK = ROOT / "scripts" / "unpack_deps.sh"
DEVICE_CHECK = ROOT / "scripts" / "device_check.sh"

# The scripts run with the system's folders only, plus where this machine's ctest lives: the GPU machine's
# comes with its Python's cmake, not in /usr/bin.
TOOLS_PATH = ":".join(dict.fromkeys(["/usr/bin", "/bin"] + ([str(pathlib.Path(shutil.which("ctest")).parent)]
                                                            if shutil.which("ctest") else [])))

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to make test packages")


def make_deb(folder, name, files=(), links=()):
    """A minimal binary package holding `files` (path -> text) and `links` (path -> target)."""
    root = folder / f"{name}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: sjd <sjd@example.invalid>\n"
        f"Description: test package\n")
    for path, text in dict(files).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    for path, target in dict(links).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).symlink_to(target)
    debs = folder / "debs"
    debs.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(debs / f"{name}.deb")],
                   check=True, capture_output=True)
    return debs


def unpack(debs, prefix):
    return subprocess.run(["bash", str(UNPACK), str(debs), str(prefix)], capture_output=True, text=True)


LIB = "usr/lib/x86_64-linux-gnu"


def test_unpack_deps_unpacks_every_package_and_keeps_a_complete_prefix(tmp_path):
    make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    debs = make_deb(tmp_path, "libfoo-dev", files={"usr/include/foo.h": "int foo();"},
                    links={f"{LIB}/libfoo.so": "libfoo.so.1"})
    prefix = tmp_path / "prefix"
    first = unpack(debs, prefix)
    assert first.returncode == 0, first.stderr
    assert (prefix / "usr/include/foo.h").read_text() == "int foo();"
    assert (prefix / LIB / "libfoo.so").resolve() == (prefix / LIB / "libfoo.so.1").resolve()
    assert (prefix / LIB / "libfoo.so").read_text() == "runtime"
    assert "unpacked 2 packages" in first.stdout
    # The same packages again: the prefix is kept as it is.
    (prefix / "usr/include/foo.h").write_text("kept")
    again = unpack(debs, prefix)
    assert again.returncode == 0 and "already holds the 2 packages" in again.stdout
    assert (prefix / "usr/include/foo.h").read_text() == "kept"


def test_unpack_deps_without_dpkg_unpacks_the_same_tree(tmp_path):
    # The GPU machine's system is not ours to know: without dpkg the script reads the .deb as an ar archive.
    make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    debs = make_deb(tmp_path, "libfoo-dev", files={"usr/include/foo.h": "int foo();"},
                    links={f"{LIB}/libfoo.so": "libfoo.so.1"})
    no_dpkg = tmp_path / "bin"
    no_dpkg.mkdir()
    for folder in ("/usr/bin", "/bin"):
        for tool in pathlib.Path(folder).iterdir():
            if not tool.name.startswith("dpkg") and not (no_dpkg / tool.name).exists():
                (no_dpkg / tool.name).symlink_to(tool)
    result = subprocess.run(["bash", str(UNPACK), str(debs), str(tmp_path / "ar")], capture_output=True, text=True,
                            env={"PATH": str(no_dpkg)})
    assert result.returncode == 0, result.stderr
    assert unpack(debs, tmp_path / "dpkg").returncode == 0

    def tree(root):
        return sorted((str(p.relative_to(root)), p.is_symlink() and str(p.readlink()) or p.is_file() and p.read_text())
                      for p in root.rglob("*"))
    assert tree(tmp_path / "ar") == tree(tmp_path / "dpkg")
    assert (tmp_path / "ar" / LIB / "libfoo.so").read_text() == "runtime"


def test_unpack_deps_refuses_links_that_leave_the_prefix_or_dangle(tmp_path):
    # Only the -dev half was gathered: its link points at a runtime library that is not there.
    debs = make_deb(tmp_path, "libbar-dev", links={f"{LIB}/libbar.so": "libbar.so.2"})
    result = unpack(debs, tmp_path / "dangling")
    assert result.returncode == 1
    assert "dangling link" in result.stderr and "libbar.so" in result.stderr
    other = tmp_path / "other"
    debs = make_deb(other, "libbaz-dev", links={f"{LIB}/libbaz.so": "/usr/lib/x86_64-linux-gnu/libbaz.so.1"})
    result = unpack(debs, tmp_path / "outside")
    assert result.returncode == 1
    assert "points outside the prefix" in result.stderr and "libbaz.so" in result.stderr


@pytest.mark.parametrize("prefix", ["/", "/usr", "/usr/local", "/usr/../"])
def test_unpack_deps_never_unpacks_into_system_folders(tmp_path, prefix):
    debs = make_deb(tmp_path, "harmless", files={"usr/share/harmless/README": "x"})
    result = unpack(debs, prefix)
    assert result.returncode == 2 and "refusing to unpack" in result.stderr


def test_unpack_deps_leaves_a_folder_it_did_not_make(tmp_path):
    debs = make_deb(tmp_path, "harmless", files={"usr/share/harmless/README": "x"})
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    result = unpack(debs, home)
    assert result.returncode == 2 and "was not made by unpack_deps.sh" in result.stderr
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]


def test_unpack_deps_names_an_empty_package_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    result = unpack(tmp_path / "empty", tmp_path / "prefix")
    assert result.returncode == 2
    assert "no .deb files in" in result.stderr and "gather_gpu_deps.sh" in result.stderr
    assert not (tmp_path / "prefix").exists()


@pytest.mark.parametrize("args, env, message", [
    ([], {}, "usage: scripts/device_check.sh OUT_DIR"),
    (["OUT", "build", "tset"], {}, "unknown stage 'tset'"),
    (["OUT"], {"SJD_CHECK_LIMITS": "build=5m"}, "bad SJD_CHECK_LIMITS entry 'build=5m'"),
    (["OUT"], {"SJD_CHECK_LIMITS": "compile=60"}, "bad SJD_CHECK_LIMITS entry 'compile=60'"),
    (["OUT"], {"SJD_CHECK_DEVICE": "gpu"}, "SJD_CHECK_DEVICE must be cuda or cpu, not 'gpu'"),
    (["OUT"], {"SJD_CHECK_TOTAL": "9m"}, "SJD_CHECK_TOTAL must be seconds, not '9m'"),
    (["OUT"], {"SJD_PREBUILT": "no-such-folder"}, "SJD_PREBUILT=no-such-folder has no sjd"),
])
def test_device_check_refuses_bad_arguments_before_doing_anything(tmp_path, args, env, message):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    result = subprocess.run(["bash", str(DEVICE_CHECK), *args], capture_output=True, text=True,
                            env={"PATH": TOOLS_PATH, **env})
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_device_check_keeps_the_whole_call_within_its_total_and_exits_1_when_a_command_fails(tmp_path):
    # A stand-in prebuilt sjd that starts (--help) but never finishes a generation: the run stage's first
    # command is stopped when SJD_CHECK_TOTAL is up (not at the stage's own 60 s), the rest are reported as
    # not run, results.md says how many failed, and the exit code is 1. The stand-in also reports the
    # SJD_FONT it was given: the gathered DejaVu Sans in the prefix when the machine has none of its own.
    # A stand-in Python too (it only answers the script's questions about torch), so that no import of
    # torch on a busy machine eats the short total.
    prebuilt = tmp_path / "prebuilt"
    prebuilt.mkdir()
    (prebuilt / "sjd").write_text('#!/bin/sh\n[ "$1" = --help ] && exit 0\necho "font=[${SJD_FONT:-}]"\nexec sleep 120\n')
    (tmp_path / "python").write_text("#!/bin/sh\necho /nonexistent/torch/lib\n")
    for program in (prebuilt / "sjd", tmp_path / "python"):
        program.chmod(0o755)
    debs = make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    prefix, out = tmp_path / "prefix", tmp_path / "out"
    result = subprocess.run(
        ["bash", str(DEVICE_CHECK), str(out), "run"], capture_output=True, text=True, timeout=300,
        env={"PATH": TOOLS_PATH, "SJD_PREBUILT": str(prebuilt), "SJD_DEPS_DEBS": str(debs),
             "SJD_DEPS_PREFIX": str(prefix), "SJD_CHECK_DEVICE": "cpu", "SJD_CHECK_TOTAL": "30",
             "PYTHON": str(tmp_path / "python")})
    assert result.returncode == 1, result.stdout + result.stderr
    # The script's own clock, not this test's (which would count packing on a busy machine): the command
    # was stopped at the call's 30 s, not at the stage's own 60 s nor by the stand-in's end at 120 s.
    stopped_after = int(re.search(r"\[exit 124 after (\d+) s\]", (out / "run.log").read_text())[1])
    assert stopped_after < 50, stopped_after
    results = (out / "results.md").read_text()
    assert "ok: every library found, sjd starts" in results
    # ldconfig is outside this test's PATH; device_check reads the x86-64 libstdc++ it lists
    if platform.machine() == "x86_64" and any(pathlib.Path(d, "ldconfig").exists() for d in ("/sbin", "/usr/sbin")):
        assert re.search(r"libstdc\+\+ up to GLIBCXX_3\.4\.\d+", results), results
    assert "| `generate --method ar --dtype bf16` | TIMED OUT" in results
    assert "| `generate --method sjd --dtype bf16` | not run (the stage's or the call's time was up)" in results
    # Every failure counted: ldd's refusal of the stand-in script, the stopped command and those not run.
    failed = int(re.search(r"\*\*(\d+) command\(s\) failed or ran out of time\*\* \(the exit code is 1\)", results)[1])
    assert failed == 1 + results.count("| TIMED OUT") + results.count("| not run (")
    font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    expected = "" if pathlib.Path(font).exists() else f"{prefix}{font}"
    assert f"font=[{expected}]" in (out / "run.log").read_text()


def test_device_check_reads_each_generation_s_step_compression_from_its_own_output(tmp_path):
    # A stand-in sjd whose `ar` generations succeed and print their step compression, and whose other
    # commands fail at once: a failed row must not show the compression an earlier command printed.
    prebuilt = tmp_path / "prebuilt"
    prebuilt.mkdir()
    (prebuilt / "sjd").write_text('#!/bin/sh\n[ "$1" = --help ] && exit 0\n'
                                  'case " $* " in *" --method ar "*) echo "mean step compression 1.00x"; exit 0 ;; esac\n'
                                  'exit 1\n')
    (tmp_path / "python").write_text('#!/bin/sh\ncase "$2" in *torch*) echo /nonexistent/torch/lib; exit 0 ;; esac\n'
                                     f'exec {shutil.which("python3")} "$@"\n')
    for program in (prebuilt / "sjd", tmp_path / "python"):
        program.chmod(0o755)
    debs = make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    out = tmp_path / "out"
    subprocess.run(
        ["bash", str(DEVICE_CHECK), str(out), "run"], capture_output=True, text=True, timeout=300,
        env={"PATH": TOOLS_PATH, "SJD_PREBUILT": str(prebuilt), "SJD_DEPS_DEBS": str(debs),
             "SJD_DEPS_PREFIX": str(tmp_path / "prefix"), "SJD_CHECK_DEVICE": "cpu", "SJD_CHECK_TOTAL": "120",
             "PYTHON": str(tmp_path / "python")})
    rows = {line.split("|")[1].strip(): line for line in (out / "results.md").read_text().splitlines()
            if line.startswith("| `generate --method")}
    assert "step compression 1.00" in rows["`generate --method ar --dtype bf16`"]
    assert "FAILED (exit 1)" in rows["`generate --method sjd --dtype bf16`"]
    assert "step compression" not in rows["`generate --method sjd --dtype bf16`"]


@pytest.mark.parametrize("has_pytest", [True, False])
def test_device_check_runs_a_prebuilt_suite_with_its_paths_pointed_at_this_machine(tmp_path, has_pytest):
    # A stand-in for the suite scripts/pack_prebuilt.sh packs: CTest files that name another machine's build
    # folder, source tree and Python. The suite stage must run them where they now are: `tree` runs a program of
    # the suite's build folder in the source tree; `python` runs the Python with the build folder (holding the
    # prebuilt sjd) in its environment; `fails` fails and is listed. `py.needs_pytest` stands for the Python
    # tests, left out (and said so) when the machine's Python lacks pytest or a package they use.
    # Characters a pattern would misread ('.', '#', '&'), and a Python inside the source tree.
    old_source = "/else.where/s#rc&1"
    old_python = old_source + "/.venv/bin/python"
    old_build = old_source + "/build-cuda"
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "CTestTestfile.cmake").write_text('subdirs("tests")\n')
    check = ("__import__('sys').exit(not (__import__('os').path.isfile('scripts/device_check.sh') and "
             "__import__('os').path.isfile(__import__('os').environ['SJD_BUILD_DIR'] + '/sjd')))")
    (suite / "tests" / "CTestTestfile.cmake").write_text(
        f'add_test(tree "{old_build}/tests/tests_x")\n'
        f'set_tests_properties(tree PROPERTIES WORKING_DIRECTORY "{old_source}")\n'
        f'add_test(python "{old_python}" "-c" "{check}")\n'
        f'set_tests_properties(python PROPERTIES WORKING_DIRECTORY "{old_source}" ENVIRONMENT "SJD_BUILD_DIR={old_build}")\n'
        'add_test(fails "/bin/false")\n'
        'add_test(py.needs_pytest "/bin/false")\n')
    (suite / "tests" / "tests_x").write_text("#!/bin/sh\n[ -f scripts/device_check.sh ]\n")
    (suite / "tests" / "tests_x").chmod(0o755)
    prebuilt = tmp_path / "prebuilt"
    prebuilt.mkdir()
    (prebuilt / "sjd").write_text("#!/bin/sh\nexit 0\n")
    (prebuilt / "sjd").chmod(0o755)
    subprocess.run(["tar", "-czf", str(prebuilt / "suite.tar.gz"), "-C", str(suite), "."], check=True)
    (prebuilt / "suite.paths").write_text(f"build_dir={old_build}\nsource_dir={old_source}\npython={old_python}\n")
    # The stand-in Python answers device_check's question about torch and is python3 for the rest.
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\ncase "$2" in *torch*) echo /nonexistent/torch/lib; exit 0 ;; esac\n' +
                      ('' if has_pytest else 'case "$2" in *pytest*) exit 1 ;; esac\n') +
                      f'exec {shutil.which("python3")} "$@"\n')
    python.chmod(0o755)
    debs = make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(DEVICE_CHECK), str(out), "suite"], capture_output=True, text=True, timeout=300,
        env={"PATH": TOOLS_PATH, "SJD_PREBUILT": str(prebuilt), "SJD_DEPS_DEBS": str(debs),
             "SJD_DEPS_PREFIX": str(tmp_path / "prefix"), "SJD_CHECK_DEVICE": "cpu", "PYTHON": str(python)})
    results = (out / "results.md").read_text()
    assert "ctest (the suite built with the prebuilt binaries): FAILED" in results, result.stdout + result.stderr
    if has_pytest:
        assert "50% tests passed, 2 tests failed out of 4" in results, (out / "test.log").read_text()
        assert "4 - py.needs_pytest (Failed)" in results
    else:
        assert "67% tests passed, 1 tests failed out of 3" in results, (out / "test.log").read_text()
        assert "the Python tests (py.*) left out" in results
    assert "3 - fails (Failed)" in results


def run_test_stage(tmp_path, tests_cuda_body, limits=None, stages=("build", "test"), tools=None):
    """device_check.sh's build and test stages (or `stages`) with prebuilt stand-ins: `sjd` that starts, a
    `tests_cuda` running the given sh body, and a Python naming no torch; `tools`, a folder put first on the
    PATH. Returns results.md."""
    prebuilt = tmp_path / "prebuilt"
    (prebuilt / "tests").mkdir(parents=True)
    (prebuilt / "sjd").write_text("#!/bin/sh\nexit 0\n")
    (prebuilt / "tests" / "tests_cuda").write_text("#!/bin/sh\n" + tests_cuda_body)
    (tmp_path / "python").write_text("#!/bin/sh\necho /nonexistent/torch/lib\n")
    for program in (prebuilt / "sjd", prebuilt / "tests" / "tests_cuda", tmp_path / "python"):
        program.chmod(0o755)
    debs = make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    out = tmp_path / "out"
    env = {"PATH": f"{tools}:{TOOLS_PATH}" if tools else TOOLS_PATH, "SJD_PREBUILT": str(prebuilt),
           "SJD_DEPS_DEBS": str(debs), "SJD_DEPS_PREFIX": str(tmp_path / "prefix"), "SJD_CHECK_DEVICE": "cpu",
           "PYTHON": str(tmp_path / "python")}
    if limits:
        env["SJD_CHECK_LIMITS"] = limits
    subprocess.run(["bash", str(DEVICE_CHECK), str(out), *stages], capture_output=True, text=True,
                   timeout=300, env=env)
    return (out / "results.md").read_text()


def test_device_check_switches_off_only_what_its_own_tests_found_wrong(tmp_path):
    # A stand-in tests_cuda: the whole run fails, [fused] passes alone, [columns] hangs past the stage's
    # limit, and the stage has no time left to start [graphs]. The fused kernels stay on, the columns path
    # goes off (a hang is a failure), and the graphs stay on: a rerun that never started found nothing.
    # The allocator cases run in a process of their own, with the rest told to leave them out.
    calls = tmp_path / "calls.txt"
    results = run_test_stage(
        tmp_path,
        f'echo "$*" >> {calls}\n'
        'case "$*" in *"~[graph-memory]"*) exit 1 ;; "[fused]") exit 0 ;; "[columns]") exec sleep 60 ;; esac\n'
        'exit 0\n', limits="test=6")
    assert "tests_cuda [fused]" not in results, results
    assert "- tests_cuda [columns]: TIMED OUT: the later stages run with SJD_PIPELINE_COLUMNS=0" in results
    assert "- tests_cuda [graphs]: not run (the stage's or the call's time was up): untested, SJD_CUDA_GRAPHS left" \
        in results
    assert calls.read_text().splitlines()[0] == "--durations yes ~[graph-memory]"


def test_device_check_reads_catch2_failure_counts_as_failures_not_timeouts(tmp_path):
    # Catch2 exits with its count of failed checks: 127, 124 or 200 of them are failures that end at once,
    # not "could not start", "TIMED OUT" or "no time". Each switch whose tests failed goes off.
    results = run_test_stage(
        tmp_path,
        'case "$*" in *"~[graph-memory]"*) exit 127 ;; "[fused]") exit 124 ;; "[columns]") exit 200 ;;'
        ' "[graphs]") exit 126 ;; esac\nexit 137\n')
    assert "- tests_cuda: FAILED (exit 127) in " in results, results
    for tag, code, switch in [("fused", 124, "SJD_FUSED_LAYER_OPS"), ("window-attention", 137, "SJD_WINDOW_ATTENTION"),
                              ("wide-attention", 137, "SJD_WIDE_WINDOW_ATTENTION"),
                              ("columns", 200, "SJD_PIPELINE_COLUMNS"), ("graphs", 126, "SJD_CUDA_GRAPHS")]:
        assert f"- tests_cuda [{tag}]: FAILED (exit {code}): the later stages run with {switch}=0" in results
    assert "- tests_cuda [graph-memory] (a process of its own): FAILED (exit 137) in " in results
    assert "TIMED OUT" not in results and "untested" not in results


def test_device_check_sanitize_stage_runs_each_kernel_case_under_compute_sanitizer(tmp_path):
    # A stand-in compute-sanitizer that records its arguments and finds a race in the SwiGLU kernel's case
    # only; memcheck runs once over every case, racecheck once per kernel, and each verdict names its case.
    tools = tmp_path / "tools"
    tools.mkdir()
    calls = tmp_path / "calls.txt"
    (tools / "compute-sanitizer").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\n'
        'case "$*" in *"racecheck"*"fused silu"*) echo "========= RACECHECK SUMMARY: 1 hazard displayed"; exit 1 ;;\n'
        '  *racecheck*) echo "========= RACECHECK SUMMARY: 0 hazards displayed"; exit 0 ;; esac\n'
        'echo "========= ERROR SUMMARY: 0 errors"\n')
    (tools / "compute-sanitizer").chmod(0o755)
    results = run_test_stage(tmp_path, "exit 0\n", stages=("build", "sanitize"), tools=tools)
    assert "- memcheck, all 10 cases: ok in " in results, results
    assert "ERROR SUMMARY: 0 errors" in results
    assert '- racecheck "fused silu*": FAILED (exit 1) in ' in results
    assert "RACECHECK SUMMARY: 1 hazard displayed" in results
    assert results.count("RACECHECK SUMMARY: 0 hazards displayed") == 7
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("--tool memcheck --error-exitcode 1 ") and "window attention gives softmax*," in lines[0]
    assert lines[1].endswith("tests_cuda window attention gives softmax*")
    assert len(lines) == 9


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a binary with a missing library")
def test_device_check_leaves_the_switches_alone_when_tests_cuda_does_not_load(tmp_path):
    # A prebuilt tests_cuda whose library is missing on this machine: the build stage says so and the
    # other stages go on; the test stage does not run it, so its loader's failures switch nothing off.
    prebuilt = tmp_path / "prebuilt"
    (prebuilt / "tests").mkdir(parents=True)
    (prebuilt / "sjd").write_text("#!/bin/sh\nexit 0\n")
    (prebuilt / "sjd").chmod(0o755)
    (tmp_path / "lib.c").write_text("int gone(void) { return 0; }\n")
    (tmp_path / "main.c").write_text("int gone(void);\nint main(void) { return gone(); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libgone.so"), str(tmp_path / "lib.c")], check=True)
    subprocess.run(["cc", "-o", str(prebuilt / "tests" / "tests_cuda"), str(tmp_path / "main.c"), f"-L{tmp_path}",
                    "-lgone"], check=True)
    (tmp_path / "libgone.so").unlink()
    (tmp_path / "python").write_text("#!/bin/sh\necho /nonexistent/torch/lib\n")
    (tmp_path / "python").chmod(0o755)
    debs = make_deb(tmp_path, "libfoo1", files={f"{LIB}/libfoo.so.1": "runtime"})
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(DEVICE_CHECK), str(out), "build", "test"], capture_output=True, text=True, timeout=300,
        env={"PATH": TOOLS_PATH, "SJD_PREBUILT": str(prebuilt), "SJD_DEPS_DEBS": str(debs),
             "SJD_DEPS_PREFIX": str(tmp_path / "prefix"), "SJD_CHECK_DEVICE": "cpu", "PYTHON": str(tmp_path / "python")})
    results = (out / "results.md").read_text()
    assert "FAILED: the prebuilt tests_cuda does not load here" in results, result.stdout + result.stderr
    assert "libgone.so => not found" in results
    assert "- tests_cuda: not run (it does not load here: build stage); the switches stay as they are" in results
    assert "=0" not in results.split("## test")[1]
    assert result.returncode == 1
