"""PyTorch's own distributed suite (upstream_suite.py) on grove against gloo.

Runs the suite from the installed torch four times -- real gloo and grove
standing in for it, side by side, on 2 and 3 ranks -- and fails if any test
that passes on gloo does not pass on grove. Prints the counts of each run
and what grove skips that gloo runs, with the reasons."""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import pytest

import harness  # noqa: F401 (skips the module without torch or grove.torch)

pytest.importorskip("expecttest", reason="torch's test utilities need expecttest (scripts/install-deps)")

HERE = os.path.dirname(os.path.abspath(__file__))


def start_suite(backend, world, tmp):
    """Starts one run of the suite in folder `tmp`; finish_suite reads it."""
    env = dict(os.environ, GROVE_SUITE_BACKEND=backend, WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    # torch's test harness leaves a store file per test in the temporary
    # folder (NamedTemporaryFile(delete=False)): keep them in the run's own
    env["TMPDIR"] = tmp
    # the run's working folder is a fresh one: make the import path absolute
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    out = open(os.path.join(tmp, "out.txt"), "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml",
         os.path.join(tmp, "out.xml"), os.path.join(HERE, "upstream_suite.py")],
        env=env, cwd=tmp, stdout=out, stderr=subprocess.STDOUT, text=True)
    return proc, out


def finish_suite(run, tmp):
    """{test name: "passed" | "failed" | "skipped: why"} of a run start_suite began."""
    proc, out = run
    try:
        proc.wait(timeout=1500)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("the suite ran over 1500 s in " + tmp)
    out.seek(0)
    text = out.read()
    xml_path = os.path.join(tmp, "out.xml")
    assert os.path.exists(xml_path), text[-6000:]
    outcome = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name")
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            outcome[name] = "failed"
        elif skipped is not None:
            outcome[name] = "skipped: " + (skipped.get("message") or "")
        else:
            outcome[name] = "passed"
    return outcome


def run_both(world):
    """The gloo and the grove runs' outcomes. They run side by side: a run
    spends most of its time forking ranks and polling for their exit, not on
    the CPUs, so two at once take little longer than one."""
    with tempfile.TemporaryDirectory() as gloo_tmp, tempfile.TemporaryDirectory() as grove_tmp:
        runs = [start_suite("gloo", world, gloo_tmp), start_suite("grove", world, grove_tmp)]
        try:
            return finish_suite(runs[0], gloo_tmp), finish_suite(runs[1], grove_tmp)
        finally:
            for proc, out in runs:  # (one left running when the other's report failed)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                out.close()


def summary(outcome):
    kinds = [v.split(":")[0] for v in outcome.values()]
    return {k: kinds.count(k) for k in ("passed", "failed", "skipped")}


@pytest.mark.parametrize("world", [2, 3])
def test_grove_passes_what_gloo_passes(world):
    gloo, grove = run_both(world)
    print("\n%d ranks: gloo %s, grove %s" % (world, summary(gloo), summary(grove)))
    regressions = sorted(t for t, v in gloo.items() if v == "passed" and grove.get(t) != "passed")
    stand_in = [t for t in regressions if grove.get(t, "").startswith("skipped: grove stands in")]
    for t in stand_in:
        print("  skipped on grove:", t, "--", grove[t])
    broken = [t for t in regressions if t not in stand_in]
    assert not broken, "pass on gloo, not on grove (%d ranks): %s" % (world, broken)
    assert summary(grove)["passed"] >= 50, "the suite barely ran: %s" % summary(grove)
