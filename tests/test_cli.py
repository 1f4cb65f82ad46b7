"""The ``sgdnet`` command: output of every sub-command, one-line errors with exit status 2."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import counting_builds

import sgdnet
from sgdnet import models
from sgdnet.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- help and errors
@pytest.mark.parametrize("cmd", [[], ["predict"], ["study"], ["draw"], ["trace"], ["models"]])
def test_help_everywhere(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([*cmd, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sgdnet")
    assert "%%" not in out      # argparse does not %-format descriptions: no doubled percent signs


BAD = [
    (["predict", "--variant", "sync-ps", "--workers", "1,x"], "--workers"),
    (["predict", "--variant", "sync-ps", "--workers", "0"], "must be >= 1"),
    (["predict", "--variant", "sync-ps", "--workers", "2,2"], "twice"),
    (["predict", "--workers", "1"], "--variant"),
    (["predict", "--variant", "sync-ps", "--bandwidth", "0Gbps"], "'0Gbps'"),
    (["predict", "--variant", "sync-ps", "--bandwidth", "fast"], "'fast'"),
    (["predict", "--variant", "sync-ps", "--model", "resnet5"], "unknown model 'resnet5'"),
    (["predict", "--variant", "sync-ps", "--granularity", "medium"], "medium"),
    (["predict", "--variant", "sync-ps", "--steps", "-3"], "--steps"),
    (["predict", "--variant", "sync-ps", "--option", "staleness"], "KEY=VALUE"),
    (["predict", "--variant", "sync-ps", "--workers", "1,2", "--speeds", "1,1"], "--speeds"),
    (["predict", "--variant", "sync-ps", "--straggler", "step:p=2,factor=3"], "p=2"),
    (["predict", "--variant", "sync-ps", "--plot", "curve.txt"], "--plot"),
    (["predict", "--variant", "sync-ps", "--compute-cv", "-1"], "--compute-cv"),
    (["draw", "sync-ps", "--out", "net.txt"], "unsupported suffix"),
    (["draw", "sync-ps"], "--out"),
    (["trace", "--variant", "sync-ps", "--workers", "2,4", "--out", "t.json"], "one worker count"),
    (["study", str(ROOT / "examples" / "study.yaml"), "--scheduler", "tcp://127.0.0.1:8786"],
     "needs --executor dask"),
    (["study", str(ROOT / "examples" / "study.yaml"), "--executor", "gpu"], "invalid choice"),
    (["study", str(ROOT / "examples" / "study.yaml"), "--jobs", "0"], "must be >= 1"),
    (["study", str(ROOT / "examples" / "study.yaml"), "--out", "r.xlsx"], "unknown format"),
    (["frobnicate"], "invalid choice"),
    (["models", "--colour"], "unrecognized arguments"),
]


@pytest.mark.parametrize("argv, needle", BAD)
def test_bad_arguments_one_line_exit_2(argv, needle, capsys):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("sgdnet"), err
    assert ": error: " in err and needle in err
    assert "Traceback" not in err


def test_no_command_prints_help_and_exits_2(capsys):
    code, out, err = run(capsys)
    assert code == 2 and "predict" in out


def test_unknown_variant_lists_known_ones(capsys):
    code, out, err = run(capsys, "predict", "--variant", "sync-pss", "--workers", "1")
    assert code == 2 and err.count("\n") == 1 and "sync-ps" in err and "sync-pss" in err


def test_error_in_a_fresh_interpreter_has_no_traceback(tmp_path):
    """The module entry point (what the console script calls) exits 2 with one line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    p = subprocess.run([sys.executable, "-m", "sgdnet.cli", "predict", "--variant", "sync-ps",
                        "--workers", "1,two"], capture_output=True, text=True, cwd=tmp_path,
                       env=env)
    assert p.returncode == 2
    assert p.stdout == "" and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_console_script_is_installed_and_runs(tmp_path):
    """``pip install -e .[test]`` puts an ``sgdnet`` script on PATH that runs :func:`main`."""
    (ep,) = importlib.metadata.entry_points(group="console_scripts", name="sgdnet")
    assert ep.value == "sgdnet.cli:main"
    script = Path(sysconfig.get_path("scripts")) / "sgdnet"
    assert script.is_file(), f"{script} missing: install with pip install -e .[test]"
    ok = subprocess.run([str(script), "study", "--help"], capture_output=True, text=True,
                        cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("usage: sgdnet study")
    bad = subprocess.run([str(script), "draw", "sync-ps", "--workers", "0", "--out", "n.dot"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("sgdnet draw: error: ") and bad.stderr.count("\n") == 1
    assert "must be >= 1" in bad.stderr and not (tmp_path / "n.dot").exists()


def test_parser_has_every_command():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == {"predict", "study", "draw", "trace", "plot", "models", "testbed",
                                "calibrate", "choose", "plan"}


# ---------------------------------------------------------------------------- models
def test_models_table_lists_the_library_with_totals(capsys):
    code, out, err = run(capsys, "models")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["model", "layers", "batch"]
    body = {ln.split()[0]: ln.split() for ln in lines[2:] if ln.strip() and ln[0] != " "
            and ln.split()[0] in models.names()}
    assert set(body) == set(models.names())
    m = models.load("resnet50")
    cells = body["resnet50"]
    assert int(cells[1]) == m.n_layers and int(cells[2]) == m.batch_size
    assert float(cells[3]) == pytest.approx(1e3 * m.forward_s, abs=0.05)
    assert float(cells[6]) == pytest.approx(m.grad_bytes / 1e6, abs=0.05)


def test_models_json(capsys):
    code, out, _ = run(capsys, "models", "--json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == models.names()
    vgg = next(r for r in rows if r["name"] == "vgg16")
    assert vgg["grad_bytes"] == models.load("vgg16").grad_bytes


# ---------------------------------------------------------------------------- predict
QUICK = ["--granularity", "coarse", "--steps", "40", "--warmup", "5", "--replications", "3"]


def test_predict_table(capsys):
    code, out, err = run(capsys, "predict", "--model", "resnet18", "--variant", "sync-ps",
                         "--workers", "1,2,4", "--bandwidth", "10Gbps", *QUICK)
    assert code == 0, err
    # the CLI's default cluster has no CVs: the model is deterministic, simulated once
    assert ("40 steps after 5 warm-up; the model has no randomness, so it was simulated once "
            "(all 3 replications would be identical)") in out
    lines = out.splitlines()
    hdr = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("workers"))
    assert "steps/s" in lines[hdr] and "samples/s" in lines[hdr]
    rows = [ln.split() for ln in lines[hdr + 2: hdr + 5]]
    assert [r[0] for r in rows] == ["1", "2", "4"]
    assert rows[0][1:4] and "±" in lines[hdr + 2]
    assert rows[0][7] == "1.00x" and rows[0][8] == "100.0%"


def test_predict_with_noise_reports_replications(capsys):
    code, out, err = run(capsys, "predict", "--model", "resnet18", "--variant", "sync-ps",
                         "--workers", "2", "--compute-cv", "0.1", *QUICK)
    assert code == 0, err
    assert "40 steps after 5 warm-up, 3 replications, seed 0; mean ± 95% CI" in out


def test_predict_json_says_deterministic(capsys):
    code, out, _ = run(capsys, "predict", "--variant", "allreduce", "--workers", "2", "--json",
                       *QUICK)
    doc = json.loads(out)
    assert code == 0 and doc["deterministic"] is True
    # 40 steps per worker: the run repeats after a few rounds, the rest is skipped
    [p] = doc["periodic"]
    assert p["period_steps"] == 2 and p["skipped_steps"] > 40
    code, out, _ = run(capsys, "predict", "--variant", "allreduce", "--workers", "2", "--json",
                       "--comm-cv", "0.1", *QUICK)
    doc = json.loads(out)
    assert code == 0 and doc["deterministic"] is False and doc["periodic"] == [None]


def test_predict_json_matches_predict(capsys):
    code, out, _ = run(capsys, "predict", "--variant", "allreduce", "--workers", "2,4",
                       "--json", "--seed", "3", *QUICK)
    assert code == 0
    doc = json.loads(out)
    assert doc["steps"] == 40 and doc["replications"] == 3 and doc["seed"] == 3
    assert [r["workers"] for r in doc["rows"]] == [2, 4]
    # the CLI prints what predict computes for the same arguments
    pred = sgdnet.predict("allreduce", "resnet50", sgdnet.Cluster(workers=4), granularity="coarse",
                          steps=40, warmup=5, replications=3, seed=3)
    assert doc["rows"][1]["steps_per_s_mean"] == pred.steps_per_s.mean
    assert doc["rows"][0]["speed_up"] == 1.0


def test_predict_builds_each_net_once(capsys, monkeypatch):
    # the first cluster's net is built before the JIT (bad options fail early) and reused by
    # its prediction, not built a second time; the rows are predict's
    built = counting_builds(monkeypatch)
    code, out, _ = run(capsys, "predict", "--variant", "allreduce", "--workers", "2,4",
                       "--json", "--seed", "3", *QUICK)
    assert code == 0 and built == [2, 4]
    pred = sgdnet.predict("allreduce", "resnet50", sgdnet.Cluster(workers=2), granularity="coarse",
                          steps=40, warmup=5, replications=3, seed=3)
    assert json.loads(out)["rows"][0]["steps_per_s_mean"] == pred.steps_per_s.mean


def test_predict_plot_and_trace(tmp_path, capsys):
    png, trace = tmp_path / "curve.png", tmp_path / "trace.json"
    code, out, err = run(capsys, "predict", "--variant", "sync-ps", "--workers", "1,2", *QUICK,
                         "--plot", str(png), "--trace", str(trace))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    assert str(png) in out and str(trace) in out


# ---------------------------------------------------------------------------- draw and trace
@pytest.mark.parametrize("suffix", [".dot", ".pnml", ".png"])
def test_draw(tmp_path, capsys, suffix):
    out_file = tmp_path / f"net{suffix}"
    code, out, err = run(capsys, "draw", "sync-ps", "--workers", "2", "--out", str(out_file))
    assert code == 0, err
    data = out_file.read_bytes()
    net = sgdnet.variants.build("sync-ps", models.load("resnet50"), sgdnet.Cluster(workers=2),
                                granularity="coarse")
    assert f"{len(net.transitions)} transitions" in out
    if suffix == ".dot":
        assert data.lstrip().startswith((b"digraph", b"strict digraph"))
    elif suffix == ".pnml":
        from sgdnet.net.pnml import from_pnml

        back = from_pnml(out_file)
        assert set(back.transitions) == set(net.transitions)
    else:
        assert data[:4] == b"\x89PNG"


@pytest.mark.parametrize("suffix", [".json", ".png"])
def test_trace(tmp_path, capsys, suffix):
    out_file = tmp_path / f"t{suffix}"
    code, out, err = run(capsys, "trace", "--variant", "allreduce", "--workers", "2",
                         "--model", "resnet18", "--out", str(out_file))
    assert code == 0, err
    assert "operations traced" in out
    if suffix == ".json":
        doc = json.loads(out_file.read_text())
        assert doc["traceEvents"]
    else:
        assert out_file.read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------- study
def test_study_command_runs_and_resumes(tmp_path, capsys):
    cfg = tmp_path / "s.yaml"
    cfg.write_text("seed: 2\nreplications: 2\nout: r.csv\n"
                   "fixed: {model: resnet18, granularity: coarse, steps: 30, warmup: 5}\n"
                   "grid: {variant: [sync-ps, allreduce], cluster.workers: [1, 2]}\n")
    code, out, err = run(capsys, "study", str(cfg), "--executor", "serial")
    assert code == 0, err
    assert "4 rows in" in out and "4 computed" in out
    from sgdnet.study import read_table

    rows = read_table(tmp_path / "r.csv")
    assert len(rows) == 4 and all(r["steps_per_s_mean"] > 0 for r in rows)
    code, out, _ = run(capsys, "study", str(cfg), "--executor", "serial", "--out",
                       str(tmp_path / "r.csv"))
    assert code == 0 and "0 computed" in out and "4 resumed" in out


def test_study_command_compiles_the_engine_once_before_its_rows(tmp_path, capsys, monkeypatch):
    # a cold numba cache (simulated): the study says so and compiles the kernel here, before the
    # rows (on local processes each would compile it for itself), then says how long it took
    import time

    import sgdnet.cli as cli
    import sgdnet.engine.api as api

    calls = []
    monkeypatch.setattr(cli, "_prepare_engine", lambda: time.perf_counter())
    monkeypatch.setattr(api, "ensure_kernel", lambda: calls.append(1) or True)
    cfg = tmp_path / "s.yaml"
    cfg.write_text("seed: 2\nreplications: 1\nout: r.csv\n"
                   "fixed: {model: resnet18, granularity: coarse, steps: 10, warmup: 2}\n"
                   "grid: {variant: [sync-ps]}\n")
    code, out, err = run(capsys, "study", str(cfg), "--executor", "serial")
    assert code == 0 and calls == [1] and "engine compiled in" in err, err
    monkeypatch.setattr(cli, "_prepare_engine", lambda: None)  # a warm cache: nothing said
    code, out, err = run(capsys, "study", str(cfg), "--executor", "serial", "--fresh")
    assert code == 0 and calls == [1] and "compiled" not in err
    # a cold cache again, but every row is in the table already: nothing to compile for
    checks = []
    monkeypatch.setattr(cli, "_prepare_engine", lambda: checks.append(1) or time.perf_counter())
    code, out, err = run(capsys, "study", str(cfg), "--executor", "serial")
    assert code == 0 and "1 resumed" in out and checks == [] and calls == [1], err
    # ... unless they are asked for again
    code, out, err = run(capsys, "study", str(cfg), "--executor", "serial", "--fresh")
    assert code == 0 and checks == [1] and calls == [1, 1] and "engine compiled in" in err


def test_no_compile_announced_once_the_kernel_is_here(monkeypatch):
    # a process that found no usable cache (e.g. a test worker started before the kernel was
    # compiled) and has the kernel since, or whose cache another process filled since, must not
    # announce a compile again
    from conftest import loop

    import sgdnet.cli as cli
    import sgdnet.engine.jitcache as jc

    sgdnet.simulate(loop(), steps=2, warmup=0, replications=1, seed=0, engine="generic")
    monkeypatch.setitem(jc._state, "checked", True)
    monkeypatch.setitem(jc._state, "compile", True)  # what the first check found
    assert jc.check_cache() is False
    assert cli._prepare_engine() is None
    # not in this process, but another one filled the cache since: read again, usable
    monkeypatch.setitem(jc._state, "compile", True)
    monkeypatch.setattr(jc, "_kernel_compiled", lambda: False)
    assert jc.check_cache() is False and jc._state["compile"] is False


def test_study_with_failing_rows_exits_1(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('out = "r.jsonl"\n[fixed]\nmodel = "resnet18"\nvariant = "sync-ps"\n'
                   'granularity = "coarse"\nsteps = 20\nwarmup = 2\nreplications = 2\n'
                   '[grid]\n"cluster.workers" = [1, 2]\nno_such_option = [1]\n')
    code, out, err = run(capsys, "study", str(cfg), "--executor", "serial")
    assert code == 1
    assert "2 failed" in out and "no_such_option" in err and err.count("\n") == 1


CTRL_C_STUDY = """\
seed: 4
replications: 2
fixed: {model: resnet50, granularity: coarse, steps: 100, warmup: 10}
grid:
  variant: [sync-ps, async-ps, ssp, allreduce]
  cluster.workers: [1, 2, 4, 8, 16]
  cluster.bandwidth: [1Gbps, 10Gbps, 100Gbps]
  cluster.straggler: [null, "step:p=0.2,factor=3"]
  cluster.compute_cv: [0.05]  # noisy rows: a model without randomness is simulated only once
"""


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default, so that Python installs its Ctrl-C
    handler even when the suite runs with SIGINT ignored (started in the background by a
    non-interactive shell, as a benchmark harness does), as a terminal's study would have it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_study_interrupted_by_ctrl_c_resumes_only_the_missing_rows(tmp_path, capsys):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during a study on
    local worker processes: one line on stderr, exit 130, the finished rows stay in the table,
    and rerunning the command computes only the others; the table is then the same as an
    uninterrupted run's."""
    from sgdnet.study import read_table

    cfg = tmp_path / "s.yaml"
    cfg.write_text(CTRL_C_STUDY)
    out = tmp_path / "r.csv"
    n_rows = 4 * 5 * 3 * 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, "-m", "sgdnet.cli", "study", str(cfg), "--out",
                             str(out), "--jobs", "2", "--no-progress"], cwd=tmp_path, env=env,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 11:  # header + 10 rows
                break
            if proc.poll() is not None:
                pytest.fail(f"the study ended before it could be interrupted: {proc.stderr.read()}")
            time.sleep(0.005)
        else:
            pytest.fail("no rows were written within 120 s")
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    done = read_table(out)
    assert 10 <= len(done) < n_rows
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith(f"sgdnet study: interrupted; {len(done)} rows are in {out}")
    code, text, err = run(capsys, "study", str(cfg), "--out", str(out), "--executor", "serial")
    assert code == 0, err
    assert f"{n_rows - len(done)} computed" in text and f"{len(done)} resumed" in text
    code, _, err = run(capsys, "study", str(cfg), "--out", str(tmp_path / "whole.csv"),
                       "--executor", "serial")
    assert code == 0, err
    resumed = {r["row_id"]: r for r in read_table(out)}
    whole = {r["row_id"]: r for r in read_table(tmp_path / "whole.csv")}
    assert len(resumed) == n_rows and resumed == whole


def test_predict_progress_bar_only_on_a_terminal(capsys, monkeypatch):
    argv = ["predict", "--variant", "sync-ps", "--workers", "2", "--steps", "300",
            "--replications", "2"]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "simulate" not in err  # not a terminal: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out_tty, err = run(capsys, *argv)
    assert code == 0 and "simulate sync-ps" in err and "step" in err
    assert out_tty.splitlines()[:-1] == out.splitlines()[:-1]  # same table (not the timing line)
    assert sys.stderr.isatty()  # still "a terminal": only the flag turns the bar off
    code, _, err = run(capsys, *argv, "--no-progress")
    assert code == 0 and "simulate" not in err


def test_explicit_ps_flags_override_a_cluster_file_and_defaults_do_not():
    from sgdnet.cli import _cluster
    from sgdnet.workload import Cluster

    path = "examples/clusters/p4d-8xa100-4x100g.yaml"
    file = Cluster.from_file(path, 16)
    base = ["predict", "--variant", "sync-ps", "--cluster", path, "--workers", "16"]
    args = build_parser().parse_args(base)
    got = _cluster(args, 16)
    assert (got.ps_shards, got.ps_placement) == (file.ps_shards, file.ps_placement)
    args = build_parser().parse_args([*base, "--ps-shards", "2", "--ps-placement", "colocated"])
    got = _cluster(args, 16)
    assert (got.ps_shards, got.ps_placement) == (2, "colocated")
    assert got.topology == file.topology and got.latency == file.latency
    # without a file the flags' defaults are the Cluster's
    got = _cluster(build_parser().parse_args(["predict", "--variant", "sync-ps", "--workers", "4"]), 4)
    assert (got.ps_shards, got.ps_placement) == (1, "dedicated")


def test_predict_notes_rings_that_leave_nics_idle(capsys):
    """On nodes with several NICs a ring (or pair of trees) of one channel crosses each node
    through one NIC; the CLI says so and how to run NCCL's channel per NIC, and stays silent
    once channels cover the NICs."""
    dgx = str(Path(__file__).resolve().parents[1] / "examples" / "clusters"
              / "dgx-a100-8x200g.yaml")
    base = ["predict", "--model", "resnet18", "--variant", "allreduce", "--cluster", dgx,
            "--workers", "16", "--granularity", "coarse", "--steps", "5", "--warmup", "1",
            "--no-progress"]
    code, out, _ = run(capsys, *base)
    assert code == 0
    assert "note: channels=1: each ring crosses a node through one of its 8 NICs" in out
    assert "add -o channels=8" in out
    code, out, _ = run(capsys, *base, "-o", "algorithm=dbtree", "-o", "channels=2")
    assert code == 0 and "each pair of trees crosses" in out and "channels=2:" in out
    code, out, _ = run(capsys, *base, "-o", "channels=8")
    assert code == 0 and "note:" not in out
    local = [a if a != "allreduce" else "local-sgd" for a in base]
    code, out, _ = run(capsys, *local)
    assert code == 0 and "add -o channels=8" in out
    code, out, _ = run(capsys, *local, "-o", "sync=ps")
    assert code == 0 and "note:" not in out
