"""Issue #17: a study never loses rows to a concurrent study, never creates directories, and a
hostile config (YAML alias bomb, deep nesting, non-UTF-8) ends in a StudyError at once."""

from __future__ import annotations

import concurrent.futures as cf
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sgdnet import Study
from sgdnet.errors import StudyError
from sgdnet.study import read_table
from sgdnet.study.table import TableLock

REPO = Path(__file__).resolve().parents[1]


def runner(variant, model, cluster, *, seed, **kw):
    return {"samples_per_s_mean": float(cluster.workers * (seed % 97 + 1))}


def test_second_study_on_the_same_table_is_refused_and_no_row_is_lost(tmp_path):
    out = tmp_path / "results.csv"
    other = Study(grid={"cluster.workers": [1, 2, 3]}, fixed={"variant": "b", "model": "m"}, runner=runner)
    refused: list[str] = []

    def intruding_runner(variant, model, cluster, *, seed, **kw):
        if not refused:  # while the first study holds the table, a second one writes it
            with pytest.raises(StudyError, match="another study") as e:
                other.run("serial", out=out)
            refused.append(str(e.value))
        return runner(variant, model, cluster, seed=seed, **kw)

    first = Study(grid={"cluster.workers": [1, 2, 4, 8]}, fixed={"variant": "a", "model": "m"},
                  runner=intruding_runner)
    res = first.run("serial", out=out)
    assert refused and len(res) == 4 and not res.failed
    # after the first finished, the second runs and both studies' rows are in the file
    assert len(other.run("serial", out=out)) == 3
    rows = read_table(out)
    assert sorted((r["variant"], r["cluster.workers"]) for r in rows) == \
        [("a", 1), ("a", 2), ("a", 4), ("a", 8), ("b", 1), ("b", 2), ("b", 3)]


def test_lock_held_by_another_process_is_refused(tmp_path):
    out = tmp_path / "t.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from sgdnet.study.table import TableLock
            TableLock(Path({str(out)!r})).acquire()
            print("locked", flush=True)
            sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StudyError, match="another study"):
            Study(grid={"cluster.workers": [1]}, fixed={"variant": "a", "model": "m"},
                  runner=runner).run("serial", out=out)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # the holder died: its lock went with it
    with TableLock(out):
        pass


def test_missing_output_directory_is_an_error_not_created(tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "r.csv"
    with pytest.raises(StudyError, match="does not exist"):
        Study(grid={"cluster.workers": [1]}, fixed={"variant": "a", "model": "m"},
              runner=runner).run("serial", out=out)
    assert not (tmp_path / "no").exists()


def test_config_out_in_missing_directory_is_an_error(tmp_path):
    cfg = tmp_path / "s.yaml"
    cfg.write_text("out: sub/r.csv\nfixed: {variant: a, model: m}\ngrid: {cluster.workers: [1]}\n")
    study = Study.from_file(cfg, runner=runner)
    with pytest.raises(StudyError, match="does not exist"):
        study.run("serial")
    assert not (tmp_path / "sub").exists()


BOMB = """\
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
grid: {variant: *i}
"""


def _from_file_in_subprocess(path: Path) -> subprocess.CompletedProcess:
    code = ("import sys; from sgdnet import Study\n"
            "from sgdnet.errors import StudyError\n"
            f"try: Study.from_file({str(path)!r})\n"
            "except StudyError as e: print('StudyError:', e); sys.exit(3)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    cfg = tmp_path / "bomb.yaml"
    cfg.write_text(BOMB)
    r = _from_file_in_subprocess(cfg)  # the timeout fails the test if it hangs
    assert r.returncode == 3, r.stderr
    assert "aliases" in r.stdout


def test_deep_and_non_utf8_configs_are_study_errors(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("grid: " + "[" * 5000 + "]" * 5000 + "\n")
    utf16 = tmp_path / "u16.yaml"
    utf16.write_bytes("grid: {variant: [a]}\n".encode("utf-16"))
    for cfg in (deep, utf16):
        r = _from_file_in_subprocess(cfg)
        assert r.returncode == 3, (cfg.name, r.stdout, r.stderr)


def test_bandwidth_keeps_a_numeric_column_that_sorts_right(tmp_path):
    out = tmp_path / "bw.csv"
    bws = ["10Gbps", "100Mbps", "1Gbps", "25Gbit/s"]
    Study(grid={"cluster.bandwidth": bws, "cluster.latency": ["50us"]},
          fixed={"variant": "a", "model": "m"}, runner=runner).run("serial", out=out)
    rows = read_table(out)
    assert [r["cluster.bandwidth"] for r in rows] == bws  # the label as given
    by_number = sorted(rows, key=lambda r: r["cluster.bandwidth_Bps"])
    # 1 Gbit/s = 1.25e8 bytes/s; as numbers 100M < 1G < 10G < 25G, while the labels sorted as
    # text give 100Mbps, 10Gbps, 1Gbps, 25Gbit/s (the wrong order the issue reports)
    assert [r["cluster.bandwidth"] for r in by_number] == ["100Mbps", "1Gbps", "10Gbps",
                                                            "25Gbit/s"]
    assert [r["cluster.bandwidth_Bps"] for r in by_number] == [1.25e7, 1.25e8, 1.25e9, 3.125e9]
    assert all(r["cluster.latency_s"] == pytest.approx(50e-6, rel=1e-12) for r in rows)
    assert sorted(r["cluster.bandwidth"] for r in rows) != [r["cluster.bandwidth"]
                                                            for r in by_number]


def test_local_workers_ignore_ctrl_c_while_they_start():
    """A Ctrl-C that reaches a local worker while it is still starting (importing the package:
    seconds on a loaded machine) neither kills it nor makes it print a traceback: the workers
    are started with SIGINT blocked, then ignore it, and the parent's own handler is back
    afterwards."""
    import multiprocessing
    import os
    import signal

    from sgdnet.study.executors import local_pool

    before = signal.getsignal(signal.SIGINT)
    pool = local_pool(2, multiprocessing.get_context("spawn"))
    try:
        assert signal.getsignal(signal.SIGINT) is before
        pids = list(pool._processes)  # the workers exist now, most likely still importing
        assert len(pids) == 2
        for _ in range(3):
            for pid in pids:
                os.kill(pid, signal.SIGINT)
        got = {pool.submit(os.getpid).result(timeout=120) for _ in range(8)}
        assert got <= set(pids)  # the same two workers answer: none was killed
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def test_a_ctrl_c_while_local_workers_start_is_acted_on_once_they_are_started(terminal_ctrl_c,
                                                                              monkeypatch):
    """A Ctrl-C that reaches the study's process while its local workers start is neither lost
    (it used to be ignored for that moment) nor acted on inside the pool's ``submit``: it raises
    once the workers are started, and the pool is shut down."""
    import multiprocessing

    from sgdnet.study.executors import local_pool

    pools, real = [], cf.ProcessPoolExecutor.submit

    def submit(self, fn, /, *args, **kwargs):
        if not pools:
            pools.append(self)
            signal.raise_signal(signal.SIGINT)  # in the middle of the workers' start
        future = real(self, fn, *args, **kwargs)
        pools.append(future)
        return future

    monkeypatch.setattr(cf.ProcessPoolExecutor, "submit", submit)
    with pytest.raises(KeyboardInterrupt):
        local_pool(2, multiprocessing.get_context("spawn"))
    pool, futures = pools[0], pools[1:]
    assert len(futures) == 2  # both submits completed: not cut in their middle
    assert pool._shutdown_thread  # and the pool was shut down
    pool.shutdown(wait=True)


class _PoolCtrlCInSubmit(cf.ThreadPoolExecutor):
    """A pool whose fifth ``submit`` receives a Ctrl-C in its middle: the window in which a
    ``KeyboardInterrupt`` left a process pool with a work item registered but never queued, so
    that its shutdown waited forever (a CI run's Ctrl-C test hung this way)."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submits = 0
        self.completed = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submits += 1
        if self.submits == 5:
            signal.raise_signal(signal.SIGINT)
        future = super().submit(fn, *args, **kwargs)
        self.completed += 1
        return future


@pytest.fixture
def terminal_ctrl_c():
    """SIGINT raises KeyboardInterrupt, as in a terminal (the suite may run with it ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_inside_the_executors_submit_waits_for_it_then_stops_between_rows(
        tmp_path, terminal_ctrl_c):
    """A Ctrl-C arriving inside the executor's ``submit`` lets that call finish; the study stops
    before the next submission, keeps every finished row, and a rerun computes only the rest:
    the table is then an uninterrupted run's."""
    grid = {"cluster.workers": list(range(1, 13))}
    fixed = {"variant": "a", "model": "m"}
    out = tmp_path / "r.csv"
    pool = _PoolCtrlCInSubmit()
    with pool, pytest.raises(KeyboardInterrupt):
        Study(grid=grid, fixed=fixed, runner=runner).run(pool, out=out, max_pending=3)
    assert pool.completed == pool.submits == 5  # not cut in its middle; none after it
    kept = read_table(out)
    assert 1 <= len(kept) <= 5
    again = Study(grid=grid, fixed=fixed, runner=runner).run("serial", out=out)
    assert (again.resumed, again.ran) == (len(kept), 12 - len(kept))
    whole = Study(grid=grid, fixed=fixed, runner=runner).run("serial", out=tmp_path / "w.csv")
    def by_id(path):  # rows land in the file in the order they finished
        return sorted(read_table(path), key=lambda r: r["row_id"])

    assert by_id(out) == by_id(tmp_path / "w.csv")
    assert [r.get("samples_per_s_mean") for r in again] == \
        [r.get("samples_per_s_mean") for r in whole]


def test_ctrl_c_while_waiting_for_rows_stops_the_study_promptly(tmp_path, terminal_ctrl_c):
    """A Ctrl-C while the study waits for rows on a pool is acted on within the wait's poll,
    not when a slow row ends; the pool then shuts down."""
    import threading
    import time

    release = threading.Event()

    def slow_runner(variant, model, cluster, *, seed, **kw):
        if cluster.workers == 3:
            threading.Timer(0.2, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT)).start()
            release.wait(60)  # the row ends only when the test lets it
        return runner(variant, model, cluster, seed=seed)

    pool = cf.ThreadPoolExecutor(max_workers=2)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            Study(grid={"cluster.workers": [1, 2, 3, 4]}, fixed={"variant": "a", "model": "m"},
                  runner=slow_runner).run(pool, out=tmp_path / "r.csv", max_pending=2)
        waited = time.monotonic() - t0
    finally:
        release.set()
        pool.shutdown(wait=True)
    assert waited < 30  # the slow row would have held it 60 s


def test_ctrl_c_during_a_row_computed_here_acts_at_once(tmp_path, terminal_ctrl_c):
    """With the serial executor the row runs in this process: a Ctrl-C inside it interrupts the
    row itself (it is not held until the row ends), and the finished rows stay in the table."""
    reached = []

    def interrupted_runner(variant, model, cluster, *, seed, **kw):
        if cluster.workers == 3:
            signal.raise_signal(signal.SIGINT)
            reached.append(cluster.workers)  # not reached: the interrupt acts inside the row
        return runner(variant, model, cluster, seed=seed)

    out = tmp_path / "r.csv"
    with pytest.raises(KeyboardInterrupt):
        Study(grid={"cluster.workers": [1, 2, 3, 4]}, fixed={"variant": "a", "model": "m"},
              runner=interrupted_runner).run("serial", out=out)
    assert reached == []
    assert [r["cluster.workers"] for r in read_table(out)] == [1, 2]
