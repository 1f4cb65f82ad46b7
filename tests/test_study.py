"""Study machinery: grid expansion, per-row seeds, executors, streaming tables, resume.

Most tests use small module-level runners in place of :func:`sgdnet.predict` (picklable, so
process pools can run them); their metrics are a known function of the row's parameters and
seed, so every executor must reproduce them exactly. The tests at the end run the real
``predict``: a >= 500-configuration study, Dask ``LocalCluster`` vs local processes, and a
study killed by a signal and resumed.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sgdnet
from sgdnet.errors import DeadlockError, StudyError, VariantError
from sgdnet.results import Estimate
from sgdnet.study import Study, read_table, row_id, row_seed, summarize

ROOT = Path(__file__).resolve().parents[1]

# pandas and distributed are imported by the tests that use them, not here: the local-executor
# workers and the killed script of the tests below import this module (its runners), and would
# each pay for both (~0.7 s of CPU a process)


# ---------------------------------------------------------------------------- fake runners
class FakeResult:
    def __init__(self, seeds, names, tags):
        self.seeds = seeds
        self.resource_names = names
        self.resource_tags = tags


class FakePrediction:
    """What predict returns, as far as summarize reads it."""

    def __init__(self, steps, workers, batch, seeds, utils):
        self.steps_per_s = Estimate(steps, unit="steps/s")
        self.samples_per_s = Estimate(np.asarray(steps) * workers * batch, unit="samples/s")
        names = list(utils)
        self.utilization = {n: Estimate(v) for n, v in utils.items()}
        kinds = [{"kind": n.rsplit("_", 1)[0]} for n in names]
        self.result = FakeResult(seeds, names, kinds)


def fake_runner(variant, model, cluster, *, seed, replications=4, **options):
    """Throughput = f(variant, workers, bandwidth) + noise drawn from ``seed``."""
    if variant == "broken":
        raise VariantError(f"variant {variant!r} cannot be built (test)")
    if variant == "deadlocks":
        raise DeadlockError("net deadlocked (test)\nsecond line", marking={"p": 0})
    rng = np.random.default_rng(seed)
    n = cluster.workers
    comm = 1.0 / cluster.bandwidth * 1e9 * (0.0 if variant == "local" else 0.05)
    base = 10.0 / (1.0 + comm * (n - 1)) * (1.0 + 0.1 * options.get("bonus", 0))
    steps = base + rng.normal(0.0, 0.1, replications)
    utils = {f"gpu_{i}": np.full(replications, 0.5 + 0.1 * i / n) for i in range(n)}
    if variant == "ps":  # a resource kind the other variants lack
        utils["ps_cpu_0"] = np.full(replications, 0.25)
    seeds = [int(s) for s in rng.integers(0, 2**31, replications)]
    return FakePrediction(steps, n, 32, seeds, utils)


def dict_runner(variant, model, cluster, *, seed, **kw):
    """A runner returning flat metrics directly."""
    return {"samples_per_s_mean": float(cluster.workers * (seed % 97 + 1)), "note": [1, 2]}


def sleepy_runner(variant, model, cluster, *, seed, **kw):
    time.sleep(0.05)
    return fake_runner(variant, model, cluster, seed=seed, **kw)


CALLS: list[dict] = []


def recording_runner(variant, model, cluster, *, seed, **kw):
    CALLS.append({"variant": variant, "workers": cluster.workers, "seed": seed})
    return fake_runner(variant, model, cluster, seed=seed, **kw)


class Boom(RuntimeError):
    pass


def failing_after(k):
    def runner(variant, model, cluster, *, seed, **kw):
        if len(CALLS) >= k:
            raise Boom("killed")
        return recording_runner(variant, model, cluster, seed=seed, **kw)

    return runner


GRID = {"variant": ["ps", "allreduce"], "cluster.workers": [1, 2, 4],
        "cluster.bandwidth": ["1Gbps", "10Gbps"]}
FIXED = {"model": "resnet50"}


def small_study(**kw):
    kw.setdefault("runner", fake_runner)
    kw.setdefault("replications", 3)
    return Study(grid=dict(GRID), fixed=dict(FIXED), seed=kw.pop("seed", 7), **kw)


def _defined(row):
    return {k: v for k, v in row.items() if v is not None}


def same(a, b):
    """Rows equal to the last bit (cells that are None or absent count as equal)."""
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert _defined(ra) == _defined(rb)


# ---------------------------------------------------------------------------- expansion
def test_grid_expands_in_order_with_fixed_and_replications():
    s = small_study()
    cfgs = s.configs()
    assert len(s) == len(cfgs) == 2 * 3 * 2
    assert cfgs[0] == {"model": "resnet50", "variant": "ps", "cluster.workers": 1,
                       "cluster.bandwidth": "1Gbps", "replications": 3}
    # the last axis varies fastest
    assert [c["cluster.bandwidth"] for c in cfgs[:2]] == ["1Gbps", "10Gbps"]
    assert [c["variant"] for c in cfgs] == ["ps"] * 6 + ["allreduce"] * 6
    assert s.param_names == ["model", "variant", "cluster.workers", "cluster.bandwidth",
                             "replications"]


def test_configs_times_grid_and_cluster_dicts_are_flattened():
    s = Study(grid={"cluster": {"workers": [1, 2]}},
              configs=[{"variant": "a", "cluster": {"bandwidth": "1Gbps"}},
                       {"variant": "b", "options_x": 1}],
              fixed={"model": "resnet50", "cluster": sgdnet.Cluster(latency="1ms")},
              runner=fake_runner)
    cfgs = s.configs()
    assert len(cfgs) == 4
    assert cfgs[0] == {"model": "resnet50", "cluster.latency": 0.001, "variant": "a",
                       "cluster.bandwidth": "1Gbps", "cluster.workers": 1}
    assert cfgs[3]["options_x"] == 1 and cfgs[3]["cluster.workers"] == 2


@pytest.mark.parametrize("kw, needle", [
    ({"grid": {"cluster.wrkers": [1]}}, "cluster.wrkers"),
    ({"grid": {"seed": [1, 2]}}, "seed"),
    ({"grid": {"variant": []}}, "empty"),
    ({"grid": {"variant": "ps"}}, "list of values"),
    ({"grid": {"model.layers": [1]}}, "model.layers"),
    ({"grid": {"foo.bar": [1]}}, "foo.bar"),
    ({"grid": {"steps_per_s_mean": [1]}}, "steps_per_s_mean"),
    ({"configs": [{"variant": "a"}, {"variant": "a"}]}, "identical"),
    ({"configs": []}, "no configuration"),
    ({"seed": -1}, "seed"),
    ({"replications": 0}, "replications"),
    ({"on_error": "ignore"}, "on_error"),
])
def test_bad_study_definitions_raise_study_error(kw, needle):
    kw = {"fixed": {"model": "resnet50", "variant": "x"}, "runner": fake_runner, **kw}
    with pytest.raises(StudyError, match=needle.replace(".", r"\.")):
        Study(**kw)


def test_unknown_model_is_caught_before_running():
    with pytest.raises(StudyError, match="unknown model 'resnet5'"):
        Study(grid={"cluster.workers": [1]}, fixed={"model": "resnet5", "variant": "sync-ps"})


# ---------------------------------------------------------------------------- seeds
def test_row_seeds_depend_only_on_parameters_and_study_seed():
    s = small_study()
    seeds = dict(zip(s.row_ids(), s.seeds()))
    # reordering the axes and adding a value keep every existing row's id and seed
    grid2 = {"cluster.bandwidth": ["10Gbps", "1Gbps", "25Gbps"], "cluster.workers": [4, 2, 1],
             "variant": ["allreduce", "ps"]}
    s2 = Study(grid=grid2, fixed=FIXED, replications=3, seed=7, runner=fake_runner)
    seeds2 = dict(zip(s2.row_ids(), s2.seeds()))
    assert all(seeds2[k] == v for k, v in seeds.items())
    assert len(set(s2.seeds())) == len(s2)
    # another study seed gives other row ids and seeds
    s3 = small_study(seed=8)
    assert not set(s3.row_ids()) & set(seeds)
    assert not set(s3.seeds()) & set(seeds.values())
    p = s.configs()[0]
    assert row_seed(p, 7) == s.seeds()[0] and row_id(p, 7) == s.row_ids()[0]
    assert 0 <= row_seed(p, 7) < 2**63


# ---------------------------------------------------------------------------- executors
def test_serial_local_threads_and_executor_give_identical_rows(tmp_path):
    s = small_study()
    serial = s.run("serial")
    local = s.run("local", n_jobs=2)
    with cf.ThreadPoolExecutor(3) as ex:
        threads = s.run(ex)
    same(serial.rows, local.rows)
    same(serial.rows, threads.rows)
    assert [r["row_id"] for r in serial] == s.row_ids()  # grid order, whatever finished first
    assert serial.ran == len(s) and serial.resumed == 0 and not serial.failed
    # each row's seed is the one predict got: replaying it alone reproduces the row
    cfg, row = s.configs()[5], serial[5]
    pred = fake_runner(cfg["variant"], "resnet50", sgdnet.Cluster(workers=cfg["cluster.workers"],
                       bandwidth=cfg["cluster.bandwidth"]), seed=row["seed"], replications=3)
    assert row["steps_per_s_mean"] == pred.steps_per_s.mean


def test_row_columns_statistics_and_speed_up():
    res = small_study().run("serial")
    row = res[2]  # ps, 2 workers, 1Gbps
    assert (row["variant"], row["cluster.workers"], row["cluster.bandwidth"]) == ("ps", 2, "1Gbps")
    cols = list(row)
    assert cols[:7] == ["row_id", "model", "variant", "cluster.workers", "cluster.bandwidth",
                        "cluster.bandwidth_Bps", "replications"]
    assert cols[-1] == "seeds"
    seeds = json.loads(row["seeds"])
    assert len(seeds) == row["n"] == 3
    # the CI brackets the mean, quantiles are ordered
    assert row["steps_per_s_lo"] < row["steps_per_s_mean"] < row["steps_per_s_hi"]
    assert row["steps_per_s_p05"] <= row["steps_per_s_p50"] <= row["steps_per_s_p95"]
    # utilisations are grouped by the resources' kind tag: gpu_0 = 0.5, gpu_1 = 0.55
    assert row["util_gpu_mean"] == pytest.approx(0.525)
    assert row["util_gpu_max"] == pytest.approx(0.55)
    assert row["util_ps_cpu_mean"] == pytest.approx(0.25)
    # speed-up against the same configuration with one worker
    base = res[0]
    assert base["speed_up"] == 1.0 and base["efficiency"] == 1.0
    assert row["speed_up"] == pytest.approx(row["samples_per_s_mean"] / base["samples_per_s_mean"])
    assert row["efficiency"] == pytest.approx(row["speed_up"] / 2)
    # a study without one-worker rows has no speed-up
    res2 = Study(grid={"cluster.workers": [2, 4]}, fixed={"model": "m", "variant": "ps"},
                 runner=fake_runner).run("serial")
    assert all(r["speed_up"] is None and r["efficiency"] is None for r in res2)


def test_dict_runner_and_summarize_of_mappings():
    res = Study(grid={"cluster.workers": [1, 3]}, fixed={"model": "m", "variant": "v"},
                runner=dict_runner).run("serial")
    assert res[1]["speed_up"] == pytest.approx(3 * (res[1]["seed"] % 97 + 1)
                                               / (res[0]["seed"] % 97 + 1))
    assert res[0]["note"] == "[1,2]"
    assert summarize({"x": np.float64(2.5), "y": None}) == {"x": 2.5, "y": None}


# ---------------------------------------------------------------------------- tables
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_table_file_round_trips(tmp_path, suffix):
    out = tmp_path / f"t{suffix}"
    res = small_study().run("serial", out=out)
    back = read_table(out)
    assert len(back) == len(res)
    by_id = {r["row_id"]: r for r in back}
    same([by_id[r["row_id"]] for r in res], res.rows)
    if suffix == ".csv":
        header = out.read_text().splitlines()[0].split(",")
        # util_ps_cpu appears only with variant ps: the header was extended to the union
        assert "util_ps_cpu_mean" in header and header[-1] == "seeds"


def test_frame_has_one_row_per_configuration():
    import pandas as pd

    res = small_study().run("serial")
    df = res.frame()
    assert isinstance(df, pd.DataFrame) and len(df) == len(res)
    assert list(df.columns) == res.columns
    assert df.groupby("variant").size().to_dict() == {"allreduce": 6, "ps": 6}


def test_bad_output_suffix(tmp_path):
    with pytest.raises(StudyError, match="unknown format"):
        small_study().run("serial", out=tmp_path / "t.xlsx")


def test_unknown_executor():
    with pytest.raises(StudyError, match="unknown executor 'gpu'"):
        small_study().run("gpu")


# ---------------------------------------------------------------------------- errors
def test_sgdnet_errors_are_recorded_and_count_as_done(tmp_path):
    out = tmp_path / "t.csv"
    s = Study(grid={"variant": ["ps", "broken", "deadlocks"], "cluster.workers": [1, 2]},
              fixed=FIXED, runner=fake_runner)
    res = s.run("serial", out=out)
    assert len(res.failed) == 4
    err = res.failed[0]["error"]
    assert err.startswith("VariantError: variant 'broken'")
    assert "\n" not in res.failed[2]["error"] and "DeadlockError" in res.failed[2]["error"]
    assert all(r["steps_per_s_mean"] is None for r in read_table(out) if r["error"])
    again = s.run("serial", out=out)
    assert again.ran == 0 and again.resumed == 6
    retried = s.run("serial", out=out, retry_errors=True)
    assert retried.ran == 4


def test_pending_counts_the_rows_a_run_would_compute(tmp_path):
    out = tmp_path / "t.csv"
    s = Study(grid={"variant": ["ps", "broken"], "cluster.workers": [1, 2, 3]}, fixed=FIXED,
              runner=fake_runner)
    assert s.pending(out) == 6 and s.pending(None) == 6
    s.run("serial", out=out)
    assert s.pending(out) == 0
    assert s.pending(out, retry_errors=True) == 3  # the failed rows
    assert s.pending(out, resume=False) == 6
    other = Study(grid={"variant": ["ps"], "cluster.workers": [1, 4]}, fixed=FIXED,
                  runner=fake_runner)
    assert other.pending(out) == 1  # one row in common; the file's other rows are not its own
    assert other.run("serial", out=out).ran == 1


@pytest.mark.parametrize("out, needle", [(123, "must be a file path"),
                                         (b"t.csv", "must be a file path"),
                                         ("t.txt", "unknown format")])
def test_a_bad_output_is_a_study_error_for_run_and_pending(out, needle):
    s = small_study()
    for call in (lambda: s.run("serial", out=out), lambda: s.pending(out)):
        with pytest.raises(StudyError, match=needle):
            call()


def test_on_error_raise_stops_with_study_error():
    s = Study(grid={"variant": ["ps", "broken"]}, fixed=FIXED, runner=fake_runner,
              on_error="raise")
    with pytest.raises(StudyError, match="broken"):
        s.run("serial")


# ---------------------------------------------------------------------------- resume
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_interrupted_study_resumes_only_missing_rows(tmp_path, suffix):
    out = tmp_path / f"t{suffix}"
    full = small_study().run("serial")
    CALLS.clear()
    with pytest.raises(Boom):
        small_study(runner=failing_after(5)).run("serial", out=out)
    first = read_table(out)
    assert len(first) == 5
    CALLS.clear()
    res = small_study(runner=recording_runner).run("serial", out=out)
    assert res.resumed == 5 and res.ran == len(full) - 5 == len(CALLS)
    done_seeds = {r["seed"] for r in first}
    assert not done_seeds & {c["seed"] for c in CALLS}
    same(res.rows, full.rows)
    same(sorted(read_table(out), key=lambda r: r["row_id"]),
         sorted(full.rows, key=lambda r: r["row_id"]))
    # nothing left to do
    CALLS.clear()
    assert small_study(runner=recording_runner).run("serial", out=out).ran == 0 and not CALLS


class _BaselinesNeverRun(cf.Executor):
    """Runs every task at once except the 1-worker ones (left pending, as on a busy pool), and
    is interrupted at the ``stop_at``-th submission."""

    def __init__(self, stop_at):
        self.stop_at, self.n = stop_at, 0

    def submit(self, fn, task):
        self.n += 1
        if self.n == self.stop_at:
            raise KeyboardInterrupt
        f = cf.Future()
        if task.params.get("cluster.workers") != 1:
            f.set_result(fn(task))
        return f


def test_rows_waiting_for_their_baseline_survive_an_interrupt(tmp_path):
    out = tmp_path / "t.csv"
    full = small_study().run("serial")
    CALLS.clear()
    # 12 rows, 4 of them baselines: the first 6 multi-worker rows finish, their baselines never do
    with pytest.raises(KeyboardInterrupt):
        # with 5 in flight each submission after the 4 baselines yields the row just run
        small_study(runner=recording_runner).run(_BaselinesNeverRun(stop_at=11), out=out,
                                                  max_pending=5)
    first = read_table(out)
    assert len(first) == len(CALLS) == 6
    assert all(r["cluster.workers"] != 1 and r["speed_up"] is None for r in first)
    # the resumed run computes only what is missing, and fills in the kept rows' speed-ups
    CALLS.clear()
    res = small_study(runner=recording_runner).run("serial", out=out)
    assert res.resumed == 6 and res.ran == len(CALLS) == len(full) - 6
    same(res.rows, full.rows)
    assert all(r["speed_up"] is not None for r in res)
    same(sorted(read_table(out), key=lambda r: r["row_id"]),
         sorted(full.rows, key=lambda r: r["row_id"]))


def test_torn_last_line_is_dropped_and_rerun(tmp_path):
    out = tmp_path / "t.jsonl"
    s = small_study()
    s.run("serial", out=out)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    assert len(read_table(out)) == 4
    res = s.run("serial", out=out)
    assert res.resumed == 4 and res.ran == len(s) - 4
    assert len(read_table(out)) == len(s)


def test_rows_of_another_study_in_the_file_are_kept(tmp_path):
    out = tmp_path / "t.csv"
    small_study().run("serial", out=out)
    other = small_study(seed=99).run("serial", out=out)
    assert other.ran == len(other) and len(read_table(out)) == 2 * len(other)
    assert small_study(seed=7).run("serial", out=out).ran == 0


def test_fresh_run_discards_the_file(tmp_path):
    out = tmp_path / "t.csv"
    s = small_study()
    s.run("serial", out=out)
    assert s.run("serial", out=out, resume=False).ran == len(s)


# ---------------------------------------------------------------------------- config files
YAML = """\
seed: 3
replications: 2
out: res.csv
fixed: {model: resnet50, bonus: 1}
grid:
  variant: [ps, allreduce]
  cluster:
    workers: [1, 2]
    straggler:
      - null
      - {kind: step, p: 0.1, factor: 3}
"""

TOML = """\
seed = 3
replications = 2
out = "res.csv"
[fixed]
model = "resnet50"
bonus = 1
[grid]
variant = ["ps", "allreduce"]
"cluster.workers" = [1, 2]
"cluster.straggler" = ["none", {kind = "step", p = 0.1, factor = 3}]
"""


def test_from_file_yaml_and_toml(tmp_path):
    (tmp_path / "s.yaml").write_text(YAML)
    (tmp_path / "s.toml").write_text(TOML)
    a = Study.from_file(tmp_path / "s.yaml", runner=fake_runner)
    b = Study.from_file(tmp_path / "s.toml", runner=fake_runner)
    assert len(a) == len(b) == 8
    assert a.out == tmp_path / "res.csv" and a.seed == 3
    cfg = a.configs()[1]
    assert cfg["cluster.straggler"] == {"kind": "step", "p": 0.1, "factor": 3}
    assert cfg["bonus"] == 1 and cfg["replications"] == 2
    res = a.run("serial")
    assert res[1]["cluster.straggler"] == '{"factor":3,"kind":"step","p":0.1}'
    assert res[0]["cluster.straggler"] is None
    # the runner got a straggler model parsed from the spec
    assert res[0]["n"] == 2


@pytest.mark.parametrize("text, suffix, needle", [
    ("grid: {variant: [a]\n", ".yaml", "does not parse"),
    ("grid = [", ".toml", "does not parse"),
    ("grid: {variant: [a]}\nextra: 1\n", ".yaml", "unknown key"),
    ("fixed: {model: resnet50}\n", ".yaml", "neither 'grid' nor 'configs'"),
    ("- 1\n- 2\n", ".yaml", "must be a mapping"),
    ("grid: {variant: [a]}\n", ".ini", "unknown format"),
])
def test_bad_config_files(tmp_path, text, suffix, needle):
    p = tmp_path / f"s{suffix}"
    p.write_text(text)
    with pytest.raises(StudyError, match=needle):
        Study.from_file(p, runner=fake_runner)


def test_missing_config_file(tmp_path):
    with pytest.raises(StudyError, match="does not exist"):
        Study.from_file(tmp_path / "nope.yaml")


def test_example_config_parses():
    s = Study.from_file(ROOT / "examples" / "study.yaml", runner=fake_runner)
    assert len(s) == 500 and s.out == ROOT / "examples" / "study_results.csv"


# ---------------------------------------------------------------------------- kill -9
KILL_SCRIPT = """\
import sys
sys.path[:0] = [{tests!r}, {root!r}]
from test_study import small_study, sleepy_runner
if __name__ == "__main__":
    small_study(runner=sleepy_runner).run("serial", out={out!r})
"""


def test_study_killed_by_a_signal_resumes(tmp_path):
    out = tmp_path / "t.csv"
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT.format(tests=str(ROOT / "tests"), root=str(ROOT), out=str(out)))
    proc = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 5:  # header + 4 rows
                break
            if proc.poll() is not None:
                pytest.fail("the study finished before it could be killed")
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    done = read_table(out)
    assert 4 <= len(done) < 12
    CALLS.clear()
    res = small_study(runner=recording_runner).run("serial", out=out)
    assert res.resumed == len(done) and res.ran == len(CALLS) == 12 - len(done)
    same(res.rows, small_study().run("serial").rows)


UNGUARDED_SCRIPT = """\
import sys
sys.path.insert(0, {root!r})
from sgdnet import Study
Study(grid={{"cluster.workers": [1, 2]}}, fixed={{"model": "resnet18", "variant": "sync-ps",
      "granularity": "coarse", "steps": 10}}, replications=1).run("local", n_jobs=1,
                                                                out={out!r})
"""


def test_local_study_from_a_script_without_main_guard_says_how_to_fix(tmp_path):
    """Spawned workers re-run the user's script; without ``if __name__ == '__main__':`` the run
    must end with a StudyError naming the fix, not a multiprocessing RuntimeError or a hang."""
    script = tmp_path / "unguarded.py"
    out = tmp_path / "t.csv"
    script.write_text(UNGUARDED_SCRIPT.format(root=str(ROOT), out=str(out)))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert p.returncode == 1
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("sgdnet.errors.StudyError: a worker process of the local executor "
                           "died"), p.stderr
    assert "if __name__ == '__main__':" in last and str(out) in last
    # the workers say why they could not start, in sgdnet's words
    assert f"imported the main script {str(script)!r}" in p.stderr
    assert "RuntimeError" not in p.stderr


# ---------------------------------------------------------------------------- real predict
QUICK = {"model": "resnet50", "granularity": "coarse", "steps": 40, "warmup": 5}


def test_a_local_study_has_the_parent_compile_the_kernel_once(monkeypatch):
    # on a cold numba cache each worker process would compile the kernel for itself at its first
    # row (~30 s of CPU each): with the default runner (it simulates), two or more processes and
    # rows to compute, the parent makes sure of the kernel first; otherwise it does not
    import sgdnet.engine.api as api

    calls = []
    monkeypatch.setattr(api, "ensure_kernel", lambda: calls.append(1) or False)
    cases = [(Study(grid={"variant": ["sync-ps"]}, fixed=QUICK), 2, True, 1),
             (small_study(), 2, True, 0),  # a custom runner may not simulate at all
             (Study(grid={"variant": ["sync-ps"]}, fixed=QUICK), 1, True, 0),
             (Study(grid={"variant": ["sync-ps"]}, fixed=QUICK), 2, False, 0)]  # all resumed
    for study, n, todo, expect in cases:
        del calls[:]
        pool, close, parallel = study._executor("local", n, None, "fork", todo)
        close()
        assert parallel == n and len(calls) == expect, (n, todo, study.runner)


def test_a_dask_local_cluster_study_has_the_parent_compile_the_kernel_first(monkeypatch):
    # the same for the worker processes of a new LocalCluster (faked here: only the order of
    # events matters), and not for a custom runner
    import distributed

    import sgdnet.engine.api as api

    events = []

    class FakeCluster:
        def __init__(self, n_workers, **kw):
            events.append(("cluster", n_workers))

        def close(self):
            pass

    class FakeClient:
        def __init__(self, cluster):
            pass

        def get_executor(self, pure):
            return "executor"

        def nthreads(self):
            return {"a": 1, "b": 1}

        def close(self):
            pass

    def no_client():
        raise ValueError("no client")

    monkeypatch.setattr(distributed, "LocalCluster", FakeCluster)
    monkeypatch.setattr(distributed, "Client", FakeClient)
    monkeypatch.setattr(distributed, "get_client", no_client)
    monkeypatch.setattr(api, "ensure_kernel", lambda: events.append("kernel"))
    for study, expect in ((Study(grid={"variant": ["sync-ps"]}, fixed=QUICK),
                           ["kernel", ("cluster", 2)]),
                          (small_study(), [("cluster", 2)])):
        del events[:]
        ex, close, parallel = study._executor("dask", 2, None, "spawn", True)
        close()
        assert (ex, parallel, events) == ("executor", 2, expect)


def test_500_configurations_with_predict_locally(tmp_path):
    """4 variants x 5 worker counts x 5 bandwidths x 5 straggler levels = 500 rows."""
    variants = ["sync-ps", "async-ps", "ssp", "allreduce"]
    stragglers = [None] + [{"kind": "step", "p": p, "factor": 3} for p in (0.05, 0.1, 0.2, 0.4)]
    s = Study(grid={"variant": variants, "cluster.workers": [1, 2, 4, 8, 16],
                    "cluster.bandwidth": ["1Gbps", "5Gbps", "10Gbps", "25Gbps", "100Gbps"],
                    "cluster.straggler": stragglers},
              fixed=QUICK, replications=2, seed=11)
    assert len(s) == 500
    res = s.run("local", out=tmp_path / "big.csv")
    assert len(res) == 500 and not res.failed, res.failed[:1]
    assert len(read_table(tmp_path / "big.csv")) == 500
    for r in res:
        assert r["steps_per_s_mean"] > 0 and r["n"] == 2
        assert r["steps_per_s_lo"] <= r["steps_per_s_mean"] <= r["steps_per_s_hi"]
    by = {(r["variant"], r["cluster.workers"], r["cluster.bandwidth"], r["cluster.straggler"]): r
          for r in res}
    # a straggler only slows a BSP step down: p=0.4 against none, 16 workers, fast network
    fast = by[("sync-ps", 16, "100Gbps", None)]["steps_per_s_mean"]
    slow = by[("sync-ps", 16, "100Gbps", json.dumps(stragglers[-1], sort_keys=True,
                                                     separators=(",", ":")))]["steps_per_s_mean"]
    assert slow < fast


def test_dask_local_cluster_gives_identical_rows():
    """Real predict on a Dask LocalCluster of two worker processes, reached through a Client
    and through the scheduler address: every row (metrics, seeds) equals the local run's, and
    every row really ran as a Dask task on those workers."""
    import distributed

    s = Study(grid={"variant": ["sync-ps", "allreduce"], "cluster.workers": [1, 3],
                    "cluster.bandwidth": ["1Gbps", "10Gbps"]},
              fixed=QUICK, replications=3, seed=5)
    local = s.run("local", n_jobs=2)
    assert not local.failed and local.ran == len(s)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream:
            dask = s.run(client)
        by_address = s.run("dask", scheduler=cluster.scheduler_address)
        workers = set(client.scheduler_info()["workers"])
    ran_on = [t["worker"] for t in stream.data if t["key"].startswith("_run_task")]
    assert len(ran_on) == len(s) and set(ran_on) <= workers
    assert dask.ran == by_address.ran == len(s)
    same(local.rows, dask.rows)
    same(local.rows, by_address.rows)


def test_common_random_numbers_give_rows_one_seed_and_correlated_replications(tmp_path):
    import sgdnet

    grid = {"cluster.bandwidth": ["10Gbps", "12Gbps"]}
    fixed = {"variant": "sync-ps", "model": "resnet18", "granularity": "coarse", "steps": 40,
             "warmup": 5, "cluster.workers": 4, "cluster.compute_cv": 0.3}
    crn = Study(grid=grid, fixed=fixed, replications=16, seed=1, common_random_numbers=True)
    ind = Study(grid=grid, fixed=fixed, replications=16, seed=1)
    assert len(set(crn.seeds())) == 1 and len(set(ind.seeds())) == 2
    assert not set(crn.row_ids()) & set(ind.row_ids())  # one kind's table never resumes the other's
    assert "common random numbers" in repr(crn)

    def samples(study):
        rows = study.run("serial", out=tmp_path / f"{id(study)}.csv", progress=False).rows
        return [sgdnet.predict("sync-ps", "resnet18", sgdnet.Cluster(workers=4, bandwidth=r["cluster.bandwidth"],
                                                                     compute_cv=0.3),
                               granularity="coarse", steps=40, warmup=5, replications=16,
                               seed=int(r["seed"])).result.throughput.samples for r in rows]

    a, b = samples(crn)
    c, d = samples(ind)
    # the same draws for every transition of both nets: the per-replication throughputs move
    # together, so their difference is far less noisy (measured: std 0.0046 against 0.032)
    assert np.corrcoef(a, b)[0, 1] > 0.9
    assert np.std(b - a) < 0.3 * np.std(d - c)


def test_common_random_numbers_is_a_config_key(tmp_path):
    cfg = tmp_path / "s.yaml"
    cfg.write_text("seed: 2\ncommon_random_numbers: true\nfixed: {variant: sync-ps, model: resnet18}\n"
                   "grid: {cluster.workers: [1, 2]}\n")
    s = Study.from_file(cfg)
    assert s.common and len(set(s.seeds())) == 1
    with pytest.raises(StudyError, match="common_random_numbers='yes' must be True or False"):
        Study(grid={"cluster.workers": [1]}, fixed={"variant": "sync-ps", "model": "resnet18"},
              common_random_numbers="yes")
