"""Issue #43 (hardening 3): the fuzz campaign's reproducers. Every one ends in a one-line
:class:`~sgdnet.SgdnetError` naming the bad value (the CLI: one line, exit 2), and none hangs: a
size or work limit, stated and overridable, is checked before the work starts.

The cases that used to run forever run in a subprocess under a timeout, so a regression fails
the test instead of hanging the suite. The damaged numba cache is covered in
``tests/test_jit_cache.py`` (it costs the suite's only engine compile)."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import sgdnet
from sgdnet import Cluster, Layer, ModelProfile, Net, Study
from sgdnet.errors import (
    ClusterError,
    DistributionError,
    NetError,
    ProfileError,
    SimulationError,
    StudyError,
    UnitError,
)

REPO = Path(__file__).resolve().parents[1]
BIG = 10**400  # an int beyond the float range: float() raises OverflowError
BIG_TEXT = "<an integer of 401 digits"  # how messages name it


def _profile(**kw) -> ModelProfile:
    return ModelProfile("m", [Layer("l", 0.01, 0.02, 1e6)], 32, **kw)


def _resnet18() -> ModelProfile:
    return sgdnet.models.load("resnet18")


# ----------------------------------------------------------------------- raw exceptions
#: (id, call, error class, text the message must hold: the value it names)
API_CASES = [
    ("units._split bandwidth", lambda: Cluster(bandwidth=BIG), UnitError, BIG_TEXT),
    ("_quantity.seconds latency", lambda: Cluster(latency=BIG), UnitError, BIG_TEXT),
    ("cluster._cvf compute_cv", lambda: Cluster(compute_cv=BIG), ClusterError, BIG_TEXT),
    ("cluster speeds", lambda: Cluster(workers=1, speeds=[BIG]), ClusterError, BIG_TEXT),
    ("layer._number", lambda: Layer("l", BIG, 1.0, 1.0), ProfileError, BIG_TEXT),
    ("layer cv", lambda: Layer("l", 1.0, 1.0, 1.0, BIG), ProfileError, BIG_TEXT),
    ("ModelProfile.scaled batch", lambda: _profile().scaled(batch_size=BIG), ProfileError,
     BIG_TEXT),
    ("ModelProfile.scaled speed", lambda: _profile().scaled(speed=BIG), ProfileError, BIG_TEXT),
    ("dists mean", lambda: sgdnet.Exponential(BIG), DistributionError, BIG_TEXT),
    ("Empirical strings", lambda: sgdnet.Empirical(["abc"]), DistributionError, "'abc'"),
    ("Empirical ragged", lambda: sgdnet.Empirical([[1], [2, 3]]), DistributionError,
     "[[1], [2, 3]]"),
    ("Empirical str", lambda: sgdnet.Empirical("abc"), DistributionError, "'abc'"),
    ("builder tags='step'", lambda: Net("n").transition("t", 1.0, tags="step"), NetError,
     "tags='step'"),
    ("builder tag key", lambda: Net("n").transition("t", 1.0, tags={1: True}), NetError,
     "tag name 1"),
    ("Study grid key", lambda: Study(grid={1: [1]}), StudyError, "1"),
    ("Study configs ints", lambda: Study(configs=[1, 2]), StudyError, "configs[0]=1"),
    ("Study configs strings", lambda: Study(configs=["x"]), StudyError, "configs[0]='x'"),
    ("Study variant list", lambda: Study(grid={"variant": [["a"]]}, fixed={"model": "resnet18"}),
     StudyError, "variant=['a']"),
    ("Study model dict", lambda: Study(grid={"model": [{"a": 1}]}, fixed={"variant": "sync-ps"}),
     StudyError, "model={'a': 1}"),
    ("Study out", lambda: Study(grid={"cluster.workers": [1]}, out=5), StudyError, "out=5"),
]


@pytest.mark.parametrize("label, call, error, needle", API_CASES, ids=[c[0] for c in API_CASES])
def test_a_raw_exception_is_now_a_project_error_naming_the_value(label, call, error, needle):
    with pytest.raises(error) as ei:
        call()
    msg = str(ei.value)
    assert needle in msg, msg
    assert len(msg) < 600 and "\n" not in msg  # one line, not 400 digits


# ----------------------------------------------------------------------- hostile files
def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


HEAD = "sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, latency: 10us}\nworkers: 2\n"
BOMB = HEAD + "measurements:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  {b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
) + "notes: *i\n"

#: (id, file name, content, text the message must hold)
FILE_CASES = [
    ("binary", "b.yaml", bytes(range(256)), "not UTF-8"),
    ("utf16", "u.yaml", (HEAD).encode("utf-16"), "UTF-16"),
    ("deep flow", "d.yaml", "a: " + "[" * 5000 + "]" * 5000, "nested deeper than"),
    ("deep block", "d2.yaml", "a:\n" + "".join("  " * i + "- \n" for i in range(3000)),
     "nested deeper than"),
    ("hosts not a mapping", "h.yaml", HEAD + "hosts: [1, 2]\n", "hosts=[1, 2]"),
    ("hosts string", "h2.yaml", HEAD + "hosts: x\n", "hosts='x'"),
    ("notes null", "n.yaml", HEAD + "notes: null\n", "notes=None"),
    ("table int", "t.yaml", "sgdnet_cluster: 1\nlink: {bandwidth: 1Gbps, table: 5}\n",
     "link.table=5"),
    ("unknown host (typo)", "k.yaml", HEAD + "hosts: {wroker0: {uplink: {bandwidth: 1Gbps}}}\n",
     "'wroker0'"),
    ("host beyond the workers", "k2.yaml",
     HEAD + "hosts: {worker7: {uplink: {bandwidth: 1Gbps}}}\n", "worker7"),
    ("ps host beyond ps_hosts", "k3.yaml", HEAD + "hosts: {ps3: {uplink: {bandwidth: 1Gbps}}}\n",
     "ps3"),
    ("alias bomb", "bomb.yaml", BOMB, "max_config_nodes"),
]


@pytest.mark.parametrize("label, name, data, needle", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_a_hostile_cluster_file_is_a_cluster_error(label, name, data, needle, tmp_path):
    p = _write(tmp_path, name, data)
    for load in (Cluster.from_file, sgdnet.load_cluster_file):
        with pytest.raises(ClusterError) as ei:
            load(p)
        assert needle in str(ei.value), str(ei.value)


def test_a_directory_or_a_missing_path_is_a_cluster_error(tmp_path):
    with pytest.raises(ClusterError, match="is a directory"):
        Cluster.from_file(tmp_path)
    with pytest.raises(ClusterError, match="cannot read: No such file"):
        Cluster.from_file(tmp_path / "nope.yaml")


def test_a_known_host_override_still_applies(tmp_path):
    p = _write(tmp_path, "ok.yaml", HEAD + "ps_hosts: 1\nhosts: {ps0: {uplink: {bandwidth: "
                                           "100Mbps}, downlink: {bandwidth: 100Mbps}}}\n")
    assert Cluster.from_file(p).ps_bandwidth == pytest.approx(100e6 / 8)  # 100 Mbit/s in B/s


def test_the_study_loader_and_the_cluster_loader_share_the_alias_bomb_limit(tmp_path):
    p = _write(tmp_path, "s.yaml", BOMB.replace(HEAD + "measurements:", "grid:"))
    with pytest.raises(StudyError, match="max_config_nodes"):
        Study.from_file(p)


def test_read_table_of_a_binary_file_is_a_study_error(tmp_path):
    from sgdnet.study import read_table

    p = _write(tmp_path, "t.jsonl", bytes(range(256)))
    with pytest.raises(StudyError, match="not UTF-8"):
        read_table(p)


# ----------------------------------------------------------------------- accepted nonsense
def test_an_absurd_batch_size_is_refused():
    with pytest.raises(ProfileError, match="max_batch_size"):
        ModelProfile("m", [Layer("l", 0.01, 0.02, 1e6)], 1e30)
    with pytest.raises(ProfileError, match=BIG_TEXT):
        ModelProfile("m", [Layer("l", 0.01, 0.02, 1e6)], BIG)


def test_a_straggler_aimed_at_a_missing_worker_is_refused():
    st = sgdnet.StepSlowdown(p=0.1, factor=3, workers=[99])
    with pytest.raises(ClusterError, match=r"workers \[99\] do not exist"):
        Cluster(workers=2, straggler=st)
    c = Cluster(workers=4, straggler=sgdnet.StepSlowdown(p=0.1, factor=3, workers=[3]))
    with pytest.raises(ClusterError, match=r"\[3\]"):
        dataclasses.replace(c, workers=2)


@pytest.mark.parametrize("value", ["yes", 1, "true", None])
def test_a_non_boolean_step_tag_is_refused(value):
    with pytest.raises(NetError, match="step="):
        Net("n").transition("t", 1.0, inputs=[], tags={"step": value})
    net = Net("n")
    net.place("a", 1)
    net.transition("t", 1.0, inputs=["a"], outputs=["a"], tags={"step": True})
    net.transitions["t"].tags["step"] = value  # an in-place edit: the validation sees it
    with pytest.raises(NetError, match="step="):
        net.validate()


def _pnml_loop() -> str:
    from sgdnet.net.pnml import to_pnml

    net = Net("n")
    net.place("a", 1)
    net.transition("t", 0.5, inputs=["a"], outputs=["a"], tags={"step": True})
    return to_pnml(net)


@pytest.mark.parametrize("edit, needle", [
    (lambda x: x.replace("<tags>", "<tagz>").replace("</tags>", "</tagz>"), "<tagz>"),
    (lambda x: x.replace("<duration>", "oops<duration>", 1), "'oops'"),
    (lambda x: x.replace("true", '"yes"'), "step='yes'"),
])
def test_pnml_sgdnet_blocks_with_unexpected_content_are_refused(edit, needle):
    from sgdnet.net.pnml import from_pnml

    text = _pnml_loop()
    assert from_pnml(text).transitions["t"].duration.mean == 0.5  # the untouched file reads
    with pytest.raises(NetError) as ei:
        from_pnml(edit(text))
    assert needle in str(ei.value)


# ----------------------------------------------------------------------- absurd durations
def test_absurd_durations_are_refused_before_the_run():
    with pytest.raises(UnitError, match="max_firing_s"):
        Cluster(update_s_per_byte=1e300)
    with pytest.raises(ProfileError, match="max_firing_s"):
        Layer("l", 1e300, 1.0, 1.0)
    net = Net("n")
    net.place("a", 1)
    net.transition("t", 1e12, inputs=["a"], outputs=["a"], tags={"step": True})
    with pytest.raises(SimulationError, match=r"'t' takes 1e\+12 s.*max_firing_s"):
        sgdnet.simulate(net, steps=2, warmup=0, replications=1)


def test_a_transfer_over_a_vanishing_link_is_refused_before_the_run():
    net = Net("n")
    net.place("a", 1)
    net.link("wire", "1e-300bps")
    net.transfer("send", 1e6, ["wire"], inputs=["a"], outputs=["a"], tags={"step": True})
    with pytest.raises(SimulationError, match="slowest link.*max_firing_s"):
        sgdnet.simulate(net, steps=2, warmup=0, replications=1)


def test_the_firing_limit_is_overridable(monkeypatch):
    from sgdnet.engine.api import check_firing_times
    from sgdnet.net.compiled import compile_net

    net = Net("n")
    net.place("a", 1)
    net.transition("t", 1e12, inputs=["a"], outputs=["a"], tags={"step": True})
    cn = compile_net(net)
    with pytest.raises(SimulationError):
        check_firing_times(cn)
    monkeypatch.setenv("SGDNET_MAX_FIRING_S", str(10**13))
    check_firing_times(cn)  # within the raised limit


def test_a_run_beyond_the_work_limit_is_refused_before_it_starts(monkeypatch):
    net = Net("n")
    net.place("a", 1)
    net.place("b")
    net.transition("t", 1.0, inputs=["a"], outputs=["b"])
    net.transition("u", 1.0, inputs=["b"], outputs=["a"], tags={"step": True})
    monkeypatch.setenv("SGDNET_MAX_RUN_EVENTS", "1000")
    # 2 transitions x 600 steps x 1 replication = 1,200 completions > 1,000
    with pytest.raises(SimulationError, match=r"about 1\.2e\+03 completions.*max_run_events"):
        sgdnet.simulate(net, steps=500, warmup=100, replications=1, engine="generic")


def test_a_million_row_grid_is_refused_before_it_is_built():
    with pytest.raises(StudyError, match="1000000 exceeds the limit.*max_study_rows"):
        Study(grid={"cluster.workers": list(range(1, 10**6 + 1))},
              fixed={"variant": "sync-ps", "model": "resnet18"})


# ----------------------------------------------------------------------- no hang
HANG_SCRIPT = """\
import sys, sgdnet
from sgdnet import Cluster, Layer, ModelProfile
case = sys.argv[1]
try:
    if case == "bandwidth":
        sgdnet.predict("sync-ps", "resnet18", Cluster(workers=2, bandwidth="1e-300bps"),
                       steps=5, replications=1)
    elif case == "update":
        sgdnet.predict("sync-ps", "resnet18", Cluster(workers=2, update_s_per_byte=1e300),
                       steps=5, replications=1)
    elif case == "grad_bytes":
        sgdnet.predict("sync-ps", ModelProfile("m", [Layer("l", 0.01, 0.01, 1e308)], 32),
                       Cluster(workers=2), steps=5, replications=1)
    elif case == "bomb":
        sgdnet.Cluster.from_file(sys.argv[2])
    print("ACCEPTED")
except sgdnet.SgdnetError as e:
    print("REFUSED", type(e).__name__, e)
"""


@pytest.mark.parametrize("case, error", [("bandwidth", "SimulationError"),
                                         ("update", "UnitError"),
                                         ("grad_bytes", "SimulationError"),
                                         ("bomb", "ClusterError")])
def test_what_used_to_run_forever_is_refused_within_the_timeout(case, error, tmp_path):
    bomb = _write(tmp_path, "bomb.yaml", BOMB)
    p = subprocess.run([sys.executable, "-c", HANG_SCRIPT, case, str(bomb)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith(f"REFUSED {error}"), p.stdout


def test_a_clock_the_flows_made_nan_still_meets_the_event_budget(tmp_path):
    # with the firing limit raised out of the way, rates of 1e-300 B/s make the flows' clock
    # inf - inf = nan; no completion ever matches it, and the run used to spin past its event
    # budget and Ctrl-C (the checks lived in the completion loop)
    p = subprocess.run([sys.executable, "-c", HANG_SCRIPT, "bandwidth"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(REPO),
                            "SGDNET_MAX_FIRING_S": str(10**308)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith("REFUSED SimulationError"), p.stdout
    assert "event budget" in p.stdout


def test_a_limit_beyond_any_float_is_refused(monkeypatch):
    from sgdnet.limits import limit

    monkeypatch.setenv("SGDNET_MAX_FIRING_S", str(10**400))
    with pytest.raises(sgdnet.SgdnetError, match="SGDNET_MAX_FIRING_S.*at most 1e\\+308"):
        limit("max_firing_s")


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--variant", "sync-ps", "--model", "resnet18", "--workers", "2",
      "--bandwidth", "1e-300bps", "--steps", "5", "--no-progress"], "max_firing_s"),
    (["predict", "--variant", "sync-ps", "--model", "resnet18", "--cluster", "{bomb}",
      "--steps", "5", "--no-progress"], "max_config_nodes"),
    (["predict", "--variant", "sync-ps", "--model", "resnet18", "--cluster", "{binary}",
      "--steps", "5", "--no-progress"], "not UTF-8"),
    (["predict", "--variant", "sync-ps", "--model", "resnet18", "--cluster", "{dir}",
      "--steps", "5", "--no-progress"], "is a directory; give a file"),
    # 4,096 workers x ResNet-50's 107 layers: at least 438,272 transitions, refused unbuilt
    (["draw", "sync-ps", "--workers", "4096", "--granularity", "fine", "--out", "{dot}"],
     "at least 438,272 transitions"),
])
def test_the_cli_refuses_with_one_line_and_exit_2(argv, needle, tmp_path, capsys):
    from sgdnet.cli import EXIT_USAGE, main

    files = {"bomb": _write(tmp_path, "bomb.yaml", BOMB),
             "binary": _write(tmp_path, "b.yaml", bytes(range(256))), "dot": tmp_path / "x.dot",
             "dir": tmp_path}
    code = main([a.format(**files) for a in argv])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], err


# ----------------------------------------------------------------------- faults
def test_a_damaged_compiled_net_cache_file_is_reported_once(tmp_path):
    from sgdnet import netcache

    bad = tmp_path / "x.pkl"
    bad.write_bytes(pickle.dumps(("fmt", 1, {}))[:7])  # truncated
    worse = tmp_path / "y.pkl"
    worse.write_bytes(b"\x80\x05garbage")
    netcache._REPORTED.clear()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert netcache._load(bad) is None and netcache._load(worse) is None
    warned = [w for w in seen if issubclass(w.category, netcache.NetCacheWarning)]
    assert len(warned) == 1 and "x.pkl" in str(warned[0].message)
    assert not bad.exists() and not worse.exists()  # both deleted, to be rebuilt


def test_a_failed_row_write_leaves_no_torn_line(tmp_path, monkeypatch):
    from sgdnet.study import read_table, table

    path = tmp_path / "t.jsonl"
    w = table._TableWriter(path, [], ["a"])
    w.append({"row_id": "r1", "a": 1})
    real = os.write

    def short_then_full(fd, data):  # half a row reaches the disk, then ENOSPC
        if fd == w._fh.fileno() and len(data) > 4:
            real(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(table.os, "write", short_then_full)
    with pytest.raises(OSError):
        w.append({"row_id": "r2", "a": 2})
    monkeypatch.setattr(table.os, "write", real)
    w.close()
    assert path.read_text() == '{"row_id": "r1", "a": 1}\n'  # the whole first row, nothing more
    assert [r["row_id"] for r in read_table(path)] == ["r1"]


ORPHAN = """\
import multiprocessing as mp, os, sys, time

def child():
    from sgdnet.study.executors import _exit_with_parent
    _exit_with_parent(0.05)
    time.sleep(600)

if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    print(p.pid, flush=True)
    time.sleep(float(sys.argv[1]))
    os._exit(0)  # as if killed: no pool shutdown, no join
"""


def test_a_pool_worker_ends_when_its_parent_is_killed(tmp_path):
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    p = subprocess.run([sys.executable, str(script), "3"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    pid = int(p.stdout.split()[0])
    for _ in range(600):  # the orphan must be gone well before this loop's ~60 s bound
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    pytest.fail(f"the orphaned worker {pid} kept running after its parent died")


# ----------------------------------------------------------------------- engine state room
def _fan_in(n: int) -> Net:
    """``n`` transfers of 1 MB into one link at once, then a step."""
    net = Net(f"fan{n}")
    net.link("wire", "1Gbps")
    net.place("go", 1)
    net.place("done")
    net.transition("fork", 0.0, inputs=["go"], outputs={f"p{i}": 1 for i in range(n)})
    for i in range(n):
        net.place(f"p{i}")
        net.transfer(f"x{i}", 1e6, ["wire"], inputs=[f"p{i}"], outputs=["done"])
    net.transition("join", 0.0, inputs={"done": n}, outputs=["go"], tags={"step": True})
    return net


def test_holder_tables_beyond_memory_are_refused_not_oom_killed(monkeypatch):
    from sgdnet.engine.driver import state_bytes
    from sgdnet.net.compiled import compile_net

    # 100 flows on one link: the kernel grows its holder tables from 16 to 64 to 256 flows,
    # 2 tables x 8 bytes x 1 link x 256 = 4,096 bytes, beyond a limit of 3,000
    assert state_bytes(compile_net(_fan_in(100)), {"holders": 256}) == 4096
    monkeypatch.setenv("SGDNET_MAX_STATE_BYTES", "3000")
    with pytest.raises(SimulationError, match=r"1 shared links holding up to 256 flows.*"
                                              r"max_state_bytes.*SGDNET_MAX_STATE_BYTES"):
        sgdnet.simulate(_fan_in(100), steps=2, warmup=0, replications=1, engine="generic")
    # 10 flows fit in the first 16-flow tables (512 bytes): the same limit lets them run, and
    # they share the link: 10 MB at 1 Gbps = 0.08 s a step
    r = sgdnet.simulate(_fan_in(10), steps=3, warmup=0, replications=1, engine="generic")
    assert r.throughput.mean == pytest.approx(1 / 0.08, rel=1e-9)
