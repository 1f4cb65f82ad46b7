"""The engine benchmark's model (bench/bench_engine.py) means the same thing in sgdnet and in
SimPy: for N=2 workers, short runs, the mean throughputs agree (Welch two-sample t-test at
alpha = 1e-3, and within 4 half-widths of the combined 95% CI)."""

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import sgdnet

pytest.importorskip("simpy")

_PATH = Path(__file__).resolve().parents[1] / "bench" / "bench_engine.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_engine", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_engine"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_bench_net_shape(bench):
    net = bench.build_bench_net(3, n_layers=5, seed=0)
    assert len(net.transitions) == 6 * 3 * 5 + 5
    assert net.step_transitions() == ["update0"]
    assert {r.discipline for r in net.resources.values()} == {"fifo"}
    net.validate()


@pytest.mark.parametrize("dist, layers", [("lognormal", 8), ("exp", 4)])
def test_simpy_and_sgdnet_agree_in_mean_throughput(bench, dist, layers):
    net = bench.build_bench_net(2, n_layers=layers, seed=0, dist=dist)
    p = net.meta["bench_params"]
    steps, warmup = 150, 15
    res = sgdnet.simulate(net, steps=steps, warmup=warmup, replications=16, seed=3)
    simpy_thr, _ = bench.simpy_replications(p, steps, warmup, replications=6, seed=4)
    a, b = res.throughput.samples, simpy_thr
    assert stats.ttest_ind(a, b, equal_var=False).pvalue > 1e-3
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert abs(a.mean() - b.mean()) < 4 * 1.96 * se
    assert np.all(np.isfinite(b)) and b.min() > 0
