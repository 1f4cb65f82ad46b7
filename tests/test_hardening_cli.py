"""Issue #17: the CLI says no to silent nonsense (unitless bandwidth/latency, '1 2' workers,
absurd sizes), creates no directories, exits as the README says for unreadable files, and treats
a closed stdout pipe as the end of the reader, not an error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgdnet.cli import EXIT_IO, EXIT_PIPE, EXIT_USAGE, build_parser, main

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--model", "resnet18", "--granularity", "coarse", "--steps", "5", "--warmup", "1"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, needle", [
    (["predict", "--variant", "sync-ps", "--bandwidth", "10"], "'10' has no unit"),
    (["predict", "--variant", "sync-ps", "--latency", "50"], "'50' has no unit"),
    (["predict", "--variant", "sync-ps", "--bandwidth", "10 parsecs"], "--bandwidth"),
    (["predict", "--variant", "sync-ps", "--workers", "99999999999"], "exceeds the limit"),
    (["draw", "sync-ps", "--workers", "100000", "--out", "x.dot"], "exceeds the limit"),
])
def test_refused_with_one_line_and_exit_2(argv, needle, capsys):
    code, out, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    assert out == "" and len(err.strip().splitlines()) == 1 and needle in err, err


def test_workers_separated_by_spaces_are_two_counts_not_twelve():
    args = build_parser().parse_args(["predict", "--variant", "sync-ps", "--workers", "1 2"])
    assert args.workers == [1, 2]
    args = build_parser().parse_args(["predict", "--variant", "sync-ps", "--workers", " 4, 8 "])
    assert args.workers == [4, 8]


def test_header_echoes_the_parsed_link(capsys):
    code, out, err = run(capsys, "predict", "--variant", "sync-ps", "--workers", "1",
                         "--bandwidth", "10Gbps", "--latency", "0.2ms", "--replications", "1",
                         "--no-progress", *SMALL)
    assert code == 0, err
    first = out.splitlines()[0]
    # 10 Gbit/s = 1.25e9 bytes/s; 0.2 ms = 200 us
    assert "10Gbps NICs (1.25 GB/s each way)" in first and "latency 0.2ms (200 us)" in first


@pytest.mark.parametrize("cmd", [
    ["draw", "sync-ps", "--workers", "2"],
    ["trace", "--variant", "sync-ps", "--workers", "2"],
])
def test_outputs_in_a_missing_directory_fail_without_creating_it(cmd, tmp_path, capsys):
    target = tmp_path / "missing" / "deeper" / ("net.dot" if cmd[0] == "draw" else "t.json")
    code, out, err = run(capsys, *cmd, *SMALL[:4], "--out", str(target))
    assert code == EXIT_IO and "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "missing").exists()


def test_predict_plot_in_missing_directory_fails_before_simulating(tmp_path, capsys):
    code, _, err = run(capsys, "predict", "--variant", "sync-ps", "--workers", "1",
                       "--plot", str(tmp_path / "nope" / "p.png"), *SMALL)
    assert code == EXIT_IO and not (tmp_path / "nope").exists()


def test_unreadable_files_exit_1_as_the_readme_says(tmp_path, capsys):
    cases = [["study", str(tmp_path / "no-such.yaml")],
             ["predict", "--variant", "sync-ps", "--model", str(tmp_path / "none.json")],
             ["predict", "--variant", "sync-ps", "--cluster", str(tmp_path / "none.yaml")]]
    for argv in cases:
        code, out, err = run(capsys, *argv)
        assert code == EXIT_IO, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_directory_given_for_a_file_is_a_usage_error(tmp_path, capsys):
    # issue #43: a directory is a bad value, not an unreadable file: exit 2, one line naming it
    for argv in (["study", str(tmp_path)],
                 ["predict", "--variant", "sync-ps", "--cluster", str(tmp_path)]):
        code, out, err = run(capsys, *argv)
        assert code == 2, (argv, err)
        assert err.strip().count("\n") == 0 and "is a directory; give a file" in err


def test_closed_stdout_pipe_is_silent(tmp_path):
    # the reader is gone before sgdnet prints (as `| head` after its lines): no "Broken pipe"
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([sys.executable, "-c", "from sgdnet.cli import main; import sys; "
                        "sys.exit(main(['models', '--json']))"],
                       stdout=w, stderr=subprocess.PIPE, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(w)
    assert p.stderr == "" and p.returncode == EXIT_PIPE
