"""Issue #17: bad API input ends in an SgdnetError naming the value, and sizes beyond the stated
limits are refused before anything is allocated (each case raised a bare Python exception, grew
memory without bound, or returned nonsense before)."""

from __future__ import annotations

import math
import tracemalloc

import pytest

import sgdnet
from sgdnet import Cluster, Estimate, Exponential, Net, simulate
from sgdnet.errors import ClusterError, NetError, SgdnetError, SimulationError


def _loop(tokens: int = 1, weight: int = 1) -> Net:
    net = Net("loop")
    a = net.place("a", tokens=tokens)
    b = net.place("b")
    net.transition("work", Exponential("10ms"), inputs={a: weight}, outputs={b: 1})
    net.transition("done", 0.0, inputs={b: 1}, outputs={a: weight}, tags={"step": True})
    return net


def _refused_cheaply(fn, error=SgdnetError, match=None, max_bytes=5_000_000):
    """``fn()`` raises ``error`` having allocated less than ``max_bytes`` of Python memory."""
    tracemalloc.start()
    try:
        with pytest.raises(error, match=match):
            fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < max_bytes, f"{peak} bytes allocated before the refusal"


def test_transition_arcs_not_a_mapping_is_a_net_error():
    net = Net("x")
    with pytest.raises(NetError, match="inputs=5"):
        net.transition("x", 1.0, inputs=5)


@pytest.mark.parametrize("field", ["tokens", "weight"])
def test_huge_tokens_or_weights_are_refused_by_validate(field):
    net = _loop(tokens=10**30) if field == "tokens" else _loop(weight=10**30)
    with pytest.raises(NetError, match="limit"):
        net.validate()


def test_tokens_that_could_overflow_int64_are_refused():
    # 2**40 tokens per firing overflow int64 after 2**23 firings, well inside the default budget
    with pytest.raises(NetError, match="max_tokens"):
        _loop(weight=2**40).validate()


def test_steps_beyond_int64_is_a_simulation_error():
    _refused_cheaply(lambda: simulate(_loop(), steps=2**63, warmup=0, replications=1),
                     SimulationError, "max_steps")


@pytest.mark.parametrize("how", ["simulate", "max_events", "predict", "cli"])
def test_more_steps_than_the_event_budget_are_refused_before_running(how, capsys):
    # found by the CLI fuzz (seed 1386): `--warmup 99999999999` spent the whole default budget
    # (10**9 completions per replication) for minutes before failing; every step is a completion,
    # so such a run cannot finish and is refused at once
    from sgdnet.cli import main

    if how == "simulate":
        call = lambda: simulate(_loop(), steps=10, warmup=10**9, replications=2)  # noqa: E731
    elif how == "max_events":
        call = lambda: simulate(_loop(), steps=50, warmup=0, max_events=49)  # noqa: E731
    elif how == "predict":
        call = lambda: sgdnet.predict("sync-ps", "resnet18", Cluster(workers=2),  # noqa: E731
                                      granularity="coarse", steps=3, warmup=99999999999)
    else:
        argv = ["predict", "--variant", "sync-ps", "--model", "resnet18", "--workers", "2",
                "--steps", "3", "--granularity", "coarse", "--warmup", "99999999999"]
        assert main(argv) == 2
        err = [ln for ln in capsys.readouterr().err.strip().splitlines()
               if not ln.startswith("sgdnet: ")]
        assert len(err) == 1 and "cannot fit in the event budget" in err[0], err
        return
    with pytest.raises(SimulationError, match="cannot fit in the event budget"):
        call()
    assert simulate(_loop(), steps=50, warmup=0, max_events=1000, replications=1).steps == 50


def test_replications_limit_refused_before_allocating_seeds():
    _refused_cheaply(lambda: simulate(_loop(), steps=10, replications=10**12),
                     SimulationError, "max_replications")


def test_output_arrays_beyond_the_memory_limit_are_refused():
    _refused_cheaply(lambda: simulate(_loop(), steps=10**9, warmup=0, replications=8),
                     SimulationError, "samples=False")


def test_limit_can_be_raised_by_environment(monkeypatch):
    monkeypatch.setenv("SGDNET_MAX_WORKERS", "3")
    with pytest.raises(ClusterError, match="SGDNET_MAX_WORKERS"):
        Cluster(workers=4)
    monkeypatch.setenv("SGDNET_MAX_WORKERS", "4")
    assert Cluster(workers=4).workers == 4


def test_cluster_workers_limit_and_unknown_field():
    _refused_cheaply(lambda: Cluster(workers=10**12), ClusterError, "max_workers")
    with pytest.raises(ClusterError, match="bogus_field"):
        Cluster(bogus_field=1)
    with pytest.raises(ClusterError, match="positional"):
        Cluster(*range(40))


@pytest.mark.parametrize("variant, granularity, option, value, limit_name", [
    ("ssp", "coarse", "staleness", 2**63, "max_staleness"),  # was OverflowError in the compile
    ("ssp", "fine", "staleness", 2**40, "max_staleness"),  # was a 16 TiB lead histogram
    ("dssp", "coarse", "r_max", 2**40, "max_rmax"),
    ("dssp", "coarse", "s_lower", 10**6, "max_staleness"),
    ("dssp", "coarse", "r_max", 1_025, "max_rmax"),
    ("dssp", "coarse", "s_upper", 2**63, "max_staleness"),
    ("sync-ps", "coarse", "shards", 2**40, "max_count"),  # was a loop over 2**40 shards
    ("ssp", "coarse", "shards", 10**5, "max_count"),  # was a net of ~10 GB
    ("allreduce", "fine", "channels", 2**40, "max_count"),
    ("backup", "coarse", "lanes", 2**40, "max_count"),
    ("pipe-sgd", "fine", "width", 2**40, "max_count"),
])
def test_variant_counts_beyond_their_limits_are_refused_before_building(
        variant, granularity, option, value, limit_name):
    _refused_cheaply(lambda: sgdnet.predict(variant, "resnet18", Cluster(workers=2),
                                            granularity=granularity, steps=3, warmup=1,
                                            replications=1, **{option: value}),
                     sgdnet.VariantError, f"{option}={value}.*{limit_name}")


def test_a_staleness_limit_can_be_raised_and_the_limit_itself_is_simulated(monkeypatch):
    at = sgdnet.limits.limit("max_staleness")
    p = sgdnet.predict("ssp", "resnet18", Cluster(workers=2), granularity="coarse", steps=4,
                       warmup=1, replications=1, staleness=at)
    assert p.steps_per_s.mean > 0
    monkeypatch.setenv("SGDNET_MAX_STALENESS", str(at + 10))
    sgdnet.predict("ssp", "resnet18", Cluster(workers=2), granularity="coarse", steps=4,
                   warmup=1, replications=1, staleness=at + 10)


def test_cluster_shards_beyond_the_limit_and_net_level_bounds():
    _refused_cheaply(lambda: Cluster(workers=2, ps_shards=2**40), ClusterError, "max_count")
    net = _loop()
    net.resource("r", capacity=2**63)  # was OverflowError in the compile
    net.transitions["work"].resources = ("r",)
    with pytest.raises(NetError, match="capacity=9223372036854775808 is beyond the limit"):
        net.validate()
    for field, value, name in (("s", 10**6, "max_staleness"), ("r_max", 2**40, "max_rmax"),
                               ("s_upper", 2**63, "max_staleness")):
        g = Net("gated")
        p = [g.place(f"p{i}", tokens=1) for i in range(2)]
        for i in range(2):
            g.transition(f"t{i}", 1.0, inputs={p[i]: 1}, outputs={p[i]: 1}, gate=("g", i),
                         tags={"step": True})
        g.gate("g", "dynamic_lag" if field != "s" else "lag", ["t0", "t1"], **{field: value})
        with pytest.raises(NetError, match=f"{field}={value}.*{name}"):
            g.validate()


@pytest.mark.parametrize("q", [2, -0.1, "median", [0.5, 1.5], math.nan])
def test_estimate_quantile_out_of_range(q):
    with pytest.raises(SgdnetError, match="q must be a probability"):
        Estimate([1.0, 2.0, 3.0]).quantile(q)


def test_estimate_quantile_in_range_matches_numpy_definition():
    # linear interpolation between order statistics: the 0.25 quantile of 1..5 is 2
    assert Estimate([5.0, 1.0, 3.0, 2.0, 4.0]).quantile(0.25) == 2.0


def test_zero_duration_loop_through_the_step_is_a_simulation_error():
    net = Net("zeno")
    a = net.place("a", tokens=1)
    net.transition("s", 0.0, inputs={a: 1}, outputs={a: 1}, tags={"step": True})
    with pytest.raises(SimulationError, match="time stopped advancing"):
        simulate(net, steps=10, warmup=0, replications=1, seed=0)


def test_limits_are_public():
    assert "limits" in sgdnet.__all__
    assert sgdnet.limits.LIMITS["max_workers"] >= 1024


def test_steps_completing_together_name_the_fix():
    """A synchronous net's workers complete a step at one instant: counting fewer steps than
    that measures nothing; the error says so and which steps= would do, instead of blaming a
    zero-duration cycle alone."""
    from sgdnet import Cluster, variants

    net = variants.build("sync-ps", "resnet18", Cluster(workers=8, bandwidth="10Gbps"))
    with pytest.raises(SimulationError, match=r"count more steps than complete together, "
                                              r"e\.g\. steps=16") as e:
        simulate(net, steps=5, warmup=1, replications=1, seed=0, parallel=False)
    assert "steps=5" in str(e.value) and "8 step transitions" in str(e.value)
    assert simulate(net, steps=16, warmup=8, replications=1, seed=0,
                    parallel=False).throughput.mean > 0
