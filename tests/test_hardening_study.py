"""Issue #17: a study never loses rows to a concurrent study, never creates directories, and a
hostile config (YAML alias bomb, deep nesting, non-UTF-8) ends in a StudyError at once."""

from __future__ import annotations

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
    are started with SIGINT ignored, and the parent's own handler is back afterwards."""
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
