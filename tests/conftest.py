"""Shared test nets: small hand-built nets used by several test files (import them with
``from conftest import ring``), and the variant-shaped nets of the viz and PNML tests.

* :func:`ring` — a cycle of transitions, the event graph whose cycle time is known exactly;
* :func:`loop` — one token through one deterministic transition (the smallest runnable net);
* :func:`random_event_graph` — a random live strongly connected event graph (seeded);
* :func:`ps_net` / :func:`exotic_net` — nets shaped like compiled variants (workers, layers,
  NICs, a PS) and one using every feature, for drawings, traces and PNML round trips.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from sgdnet import netcache
from sgdnet.dists import Deterministic, Exponential, Gamma, LogNormal, Straggler
from sgdnet.net import Net


@pytest.fixture(scope="session")
def _net_caches(tmp_path_factory):
    """The session's directory of the per-test net caches (see :func:`_private_net_cache`)."""
    return tmp_path_factory.mktemp("netcaches")


@pytest.fixture(autouse=True)
def _private_net_cache(_net_caches, monkeypatch):
    """Every test gets an empty cache of compiled nets (:mod:`sgdnet.netcache`; its subprocesses
    inherit it): no test writes to the user's ``~/.cache``, and none loads a net another test
    built, so what a test counts (builds, compiles) does not depend on the order of the tests.

    The directories are made by :func:`tempfile.mkdtemp` in one session directory, not by
    ``tmp_path_factory.mktemp`` in the session's base directory: ``mktemp`` numbers its
    directories by listing every entry of the base directory, so one per test cost O(n) per test
    and O(n^2) per session (~3 s of a serial run of 2,200 tests, and slowed every ``tmp_path``)."""
    monkeypatch.setenv("SGDNET_CACHE_DIR", tempfile.mkdtemp(prefix="netcache", dir=_net_caches))
    monkeypatch.setattr(netcache, "_MEMORY", OrderedDict())  # and its in-memory layer


def counting_builds(monkeypatch) -> list:
    """The worker counts of every variant net built from now on in the test (``VariantSpec.build``
    wrapped): how tests see that a net was reused, not built again."""
    from sgdnet.variants.registry import VariantSpec

    built: list = []
    real = VariantSpec.build
    monkeypatch.setattr(VariantSpec, "build", lambda self, *a, **k: built.append(a[1].workers)
                        or real(self, *a, **k))
    return built


def ring(durations, tokens, servers=1, name="ring", step=0, tags=None):
    """``t0 -> t1 -> ... -> t(n-1) -> t0``; place ``p_i`` (before ``t_i``) holds ``tokens[i]``.

    Transition ``t_i`` lasts ``Deterministic(durations[i])`` on ``servers`` servers; ``t[step]``
    (an index, ``-1`` for the last) is tagged ``step=True``; ``tags`` are added to every
    transition.
    """
    net = Net(name)
    n = len(durations)
    step = step % n
    for i in range(n):
        net.place(f"p{i}", tokens[i])
    for i, d in enumerate(durations):
        net.transition(f"t{i}", Deterministic(d), inputs={f"p{i}": 1},
                       outputs={f"p{(i + 1) % n}": 1}, servers=servers,
                       tags={"step": i == step, **(tags or {})})
    return net


def random_event_graph(seed, n, chords, dur):
    """A live strongly connected event graph ``teg{seed}`` of ``n`` transitions: a ring of
    forward arcs (no token) closed by a backward arc of 1-3 tokens, plus random chords until
    there are ``n + chords`` arcs (forward chords empty, backward ones 1-2 tokens); transition
    ``t_k`` lasts ``dur(rng)`` (drawn in transition order), has one server or, with probability
    0.3, infinitely many, and ``t0`` is the step."""
    rng = np.random.default_rng(seed)
    net = Net(f"teg{seed}")
    arcs = {(i, i + 1): 0 for i in range(n - 1)}
    arcs[(n - 1, 0)] = int(rng.integers(1, 4))
    while len(arcs) < n + chords:
        i, j = (int(x) for x in rng.choice(n, 2, replace=False))
        arcs.setdefault((i, j), 0 if i < j else int(rng.integers(1, 3)))
    for (i, j), tok in arcs.items():
        net.place(f"p{i}_{j}", tok)
    for k in range(n):
        d = dur(rng)
        net.transition(f"t{k}", d, inputs=[f"p{i}_{j}" for (i, j) in arcs if j == k],
                       outputs=[f"p{i}_{j}" for (i, j) in arcs if i == k],
                       servers=math.inf if rng.random() < 0.3 else 1, tags={"step": k == 0})
    return net


def loop(name="loop", duration=1.0):
    """One place with one token and one step transition ``t`` of ``duration`` looping on it."""
    net = Net(name)
    net.place("p", 1)
    net.transition("t", duration, inputs=["p"], outputs=["p"], tags={"step": True})
    return net


def ps_net(workers: int = 4, layers: int = 3, cv: float = 0.1, barrier: bool = False) -> Net:
    """A synchronous parameter-server net with per-layer push / aggregate / pull.

    Worker ``w``: forward (gpu) -> backward of layer L..1 (gpu); after backward of layer l its
    gradient is pushed (worker nic_up + ps nic_down), the PS aggregates layer l once every
    worker pushed (ps_cpu), each worker pulls it (ps nic_up + worker nic_down); when every layer
    is pulled the worker's step completes and the next forward may start. ``barrier=True``
    replaces the per-worker steps by one global step that waits for every worker, so that
    nothing is in flight when a step completes.
    """
    net = Net(f"ps-{workers}w")
    ps_cpu = net.resource("ps0/cpu", kind="ps_cpu", host="ps0")
    ps_up = net.resource("ps0/nic_up", kind="nic_up", host="ps0", discipline="ps")
    ps_down = net.resource("ps0/nic_down", kind="nic_down", host="ps0", discipline="ps")
    for w in range(workers):
        net.resource(f"worker{w}/gpu", kind="gpu", host=f"worker{w}")
        net.resource(f"worker{w}/nic_up", kind="nic_up", host=f"worker{w}")
        net.resource(f"worker{w}/nic_down", kind="nic_down", host=f"worker{w}")
    for layer in range(layers):
        net.place(f"ps/grad{layer}")
    for w in range(workers):
        gpu, up, down = (f"worker{w}/{k}" for k in ("gpu", "nic_up", "nic_down"))
        start = net.place(f"w{w}/ready", tokens=1, worker=w)
        fwd_done = net.place(f"w{w}/fwd_done", worker=w)
        net.transition(
            f"w{w}/forward", Gamma(0.010, cv), inputs={start: 1}, outputs={fwd_done: 1},
            resources=[gpu], tags={"worker": w, "kind": "compute", "layer": -1},
        )
        prev = fwd_done
        for layer in reversed(range(layers)):
            gready = net.place(f"w{w}/grad{layer}", worker=w)
            bdone = None if layer == 0 else net.place(f"w{w}/bwd_done{layer}", worker=w)
            outs = {gready: 1} if bdone is None else {gready: 1, bdone: 1}
            net.transition(
                f"w{w}/backward{layer}", Gamma(0.006, cv), inputs={prev: 1}, outputs=outs,
                resources=[gpu], tags={"worker": w, "kind": "compute", "layer": layer},
            )
            net.transition(
                f"w{w}/push{layer}", LogNormal(0.004, cv), inputs={gready: 1},
                outputs={f"ps/grad{layer}": 1}, resources=[up, ps_down], priority=layer,
                tags={"worker": w, "kind": "comm", "layer": layer, "dir": "push"},
            )
            prev = bdone
        for layer in range(layers):
            net.place(f"w{w}/param{layer}", worker=w)
            net.place(f"w{w}/pulled{layer}", worker=w)
    for layer in range(layers):
        upd = net.place(f"ps/updated{layer}")
        net.transition(
            f"ps/update{layer}", Deterministic(0.001), inputs={f"ps/grad{layer}": workers},
            outputs={upd: 1}, resources=[ps_cpu],
            tags={"kind": "update", "layer": layer},
        )
        net.transition(
            f"ps/fanout{layer}", 0.0, inputs={upd: 1},
            outputs={f"w{w}/param{layer}": 1 for w in range(workers)}, servers=math.inf,
            tags={"kind": "sync", "layer": layer},
        )
        for w in range(workers):
            net.transition(
                f"w{w}/pull{layer}", Straggler(Exponential(0.003), 0.05, 3.0),
                inputs={f"w{w}/param{layer}": 1}, outputs={f"w{w}/pulled{layer}": 1},
                resources=[ps_up, f"worker{w}/nic_down"],
                tags={"worker": w, "kind": "comm", "layer": layer, "dir": "pull"},
            )
    if barrier:
        net.transition(
            "barrier", 0.0,
            inputs={f"w{w}/pulled{layer}": 1 for w in range(workers) for layer in range(layers)},
            outputs={f"w{w}/ready": 1 for w in range(workers)}, tags={"kind": "sync", "step": True},
        )
        return net
    for w in range(workers):
        net.transition(
            f"w{w}/step", 0.0, inputs={f"w{w}/pulled{layer}": 1 for layer in range(layers)},
            outputs={f"w{w}/ready": 1},
            tags={"worker": w, "kind": "sync", "step": True},
        )
    return net


def exotic_net() -> Net:
    """A small net using every feature: inhibitors, gates, both modulator kinds, odd names, meta."""
    net = Net("exotic <net> & co")
    a = net.place("a b", tokens=2, worker=0)
    b = net.place("1st:place", worker=1)
    c = net.place("a_b")  # collides with "a b" after sanitising
    r = net.resource("gpu#0", capacity=2, discipline="priority", host="worker0", kind="gpu")
    net.markov_modulator("noisy", 3.0, "20ms", "5ms")
    t0 = net.transition(
        "go!", Straggler(LogNormal("3ms", 0.5), 0.1, 4.0), inputs={a: 1}, outputs={b: 2},
        inhibitors={c: 3}, resources=[r], priority=2, modulator="noisy",
        tags={"worker": 0, "kind": "compute", "layer": 1, "step": True, "pair": (1, 2), "x": 0.5},
        gate=("lag", 0),
    )
    t1 = net.transition(
        "back", Exponential(0.002), inputs={b: 2}, outputs={a: 1, c: 1}, servers=math.inf,
        tags={"worker": 1, "kind": "comm", "step": True}, gate=("lag", 1), modulator="iidm",
    )
    net.transition("drain", 0.001, inputs={c: 1}, outputs={a: 1}, servers=3)
    net.gate("lag", "lag", counters=[t0, t1], s=2)
    net.modulator("iidm", Gamma(1.0, 0.3), resample_on=[t1])
    net.meta.update({"variant": "exotic", "workers": 2, "shape": (2, 3), "inf": math.inf, "nested": {"k": [1, 2]}})
    return net


# ------------------------------------------------------------------ the kernel's JIT, once
#: sessions at least this large warm the kernel up front (a few selected tests do not)
WARM_UP_MIN_TESTS = 200


def _fifo_round_net() -> Net:
    """:func:`ring` with a FIFO resource held by ``t0``: a net of the FIFO-round fast path."""
    net = ring([1.0, 2.0], [1, 0], name="fifo-round")
    net.resource("r")
    net.transitions["t0"].resources = ("r",)
    return net


#: how long a worker waits for ``gw0``'s kernel before it goes on (and may compile it itself)
KERNEL_WAIT_S = 600.0

#: Test modules that neither call the generic kernel nor start processes (measured: a serial run
#: with ``driver.run``, ``subprocess.Popen`` and ``multiprocessing`` wrapped, 16 s of tests), then
#: ``test_budget.py`` (11 s, one kernel test). Under xdist they run first, so that the workers
#: other than ``gw0`` have work while ``gw0`` compiles the kernel (see
#: :func:`pytest_collection_finish`). A module listed here that starts to use the kernel costs
#: time only: its worker waits for ``gw0`` at that test (:func:`_hold_kernel_users`).
KERNEL_FREE_FIRST = (
    "test_calibrate.py", "test_profiling_device.py", "test_profiling.py", "test_analysis.py",
    "test_compile_bulk.py", "test_fastpath_halt.py", "test_draw_cap.py", "test_bulk_build.py",
    "test_gc.py", "test_dists.py", "test_cli_plot.py", "test_hardening_plots.py",
    "test_layers.py", "test_compute_model.py", "test_workload_profile.py",
    "test_hostile_files.py", "test_units.py", "test_workload_network.py",
    "test_cli_workloads.py", "test_workload_cluster.py", "test_net_builder.py",
    "test_validate_arcs.py", "test_graph.py", "test_budget.py",
)


def _kernel_marker(config) -> Path:
    """The file ``gw0`` writes once its kernel compile ended (one per xdist test run)."""
    uid = config.workerinput.get("testrunuid", "run")
    return Path(tempfile.gettempdir()) / f"sgdnet-kernel-{uid}.done"


def _warms_up(session) -> bool:
    """Whether this process is an xdist worker of a session large enough to warm up."""
    worker = getattr(session.config, "workerinput", {}).get("workerid", "")
    return worker.startswith("gw") and len(session.items) >= WARM_UP_MIN_TESTS


def pytest_collection_modifyitems(session, config, items):
    """Under xdist, the modules of :data:`KERNEL_FREE_FIRST` first (in that order), the others
    after them in their usual order. Every worker sorts alike (xdist requires the same order)."""
    if not getattr(config, "workerinput", None) or len(items) < WARM_UP_MIN_TESTS:
        return
    rank = {name: i for i, name in enumerate(KERNEL_FREE_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(rank)))  # stable


def _await_kernel_in(marker: Path):
    """A function that returns once ``marker`` exists (at most :data:`KERNEL_WAIT_S` after its
    first call), at once after it has."""
    state = {"done": False}

    def wait() -> None:
        if state["done"]:
            return
        end = time.monotonic() + KERNEL_WAIT_S
        while not marker.exists() and time.monotonic() < end:
            time.sleep(0.1)
        state["done"] = True

    return wait


def _hold_kernel_users(wait) -> None:
    """Make everything in this process that could compile the kernel call ``wait`` first: the
    generic engine's driver, the CLI's cache check (it announces a compile when it finds no
    usable cache, which a test of its one-line stderr would not expect; the engine's own checks
    are left alone, the fast paths' first runs make them), and starting a process (a CLI run, a
    study's local workers, dask), which would compile it in the child."""
    import multiprocessing.process
    import subprocess

    import sgdnet.cli as cli
    from sgdnet.engine import api, driver

    def held(fn):
        def call(*args, **kwargs):
            wait()
            return fn(*args, **kwargs)
        return call

    cli._prepare_engine = held(cli._prepare_engine)
    driver.run = api.run = held(driver.run)
    subprocess.Popen.__init__ = held(subprocess.Popen.__init__)
    multiprocessing.process.BaseProcess.start = held(multiprocessing.process.BaseProcess.start)


def pytest_collection_finish(session):
    """Under pytest-xdist (``addopts`` in setup.cfg), ``gw0`` compiles the engine's kernel before
    its first test and ``gw1`` the two fast paths (event graph and FIFO round); the other
    workers hold every use of the kernel until ``gw0`` is done, and run the kernel-free tests
    meanwhile.

    On an empty numba cache the kernel costs ~30 s of CPU, a fast path ~3 s. xdist hands tests to
    a worker as soon as its own collection is done, so ``gw1``, done with the fast paths after
    ~5 s, once met the kernel in its first test and compiled it a second time beside ``gw0``
    (a cold run: ``test_bench_model``'s first case took 27 s on ``gw1`` while ``gw0`` was still
    in this hook). Then ``gw1`` waited in this hook for ``gw0``'s marker file: ~25 s of an idle
    core per cold run. Now the kernel-free modules come first (:data:`KERNEL_FREE_FIRST`) and
    the workers other than ``gw0`` run them, waiting for the marker (at most
    :data:`KERNEL_WAIT_S`) only where the kernel could be compiled or a compile announced: at the
    generic engine's driver, the CLI's cache check, or the start of a process
    (:func:`_hold_kernel_users`). The kernel is still
    compiled once per cold run, and no test needing it (nor any process a test starts) runs
    before it is in the cache. With a warm cache this only loads them (well under a second).
    Small selections and serial runs compile lazily, as before. What the tests check is
    unchanged: the same functions, the same cache."""
    if not _warms_up(session):
        return
    index = int(session.config.workerinput["workerid"][2:])
    marker = _kernel_marker(session.config)
    if index > 0:
        _hold_kernel_users(_await_kernel_in(marker))
    if index > 1:
        return
    from sgdnet.engine.api import simulate

    kw = dict(steps=2, warmup=0, replications=1, seed=0, parallel=False)
    try:
        if index == 0:
            simulate(loop(), engine="generic", **kw)
        else:
            simulate(loop(), engine="fast", **kw)
            simulate(_fifo_round_net(), engine="fast", **kw)
    except Exception:  # noqa: BLE001 - a broken engine is the tests' to report, not this hook's
        pass
    finally:
        if index == 0:
            marker.touch()


def pytest_unconfigure(config):
    """``gw0`` removes its kernel marker at the end of the run."""
    if getattr(config, "workerinput", {}).get("workerid") == "gw0":
        _kernel_marker(config).unlink(missing_ok=True)


# ------------------------------------------------------------------ PS flow-group nets
# The clusters on which the parameter-server flow-group nets (coarse: variants/ps_coarse.py;
# fine: parameter_server's per-layer groups) are checked against the per-piece nets they replace
# (tests/test_ps_coarse.py, tests/test_ps_fine_groups.py).
PS_B = 1.25e9  # 10 Gbit/s in bytes/s
PS_ALPHA = 50e-6


def toy3():
    """A three-layer profile made by hand (forward, backward seconds; gradient bytes)."""
    from sgdnet import Layer, ModelProfile

    return ModelProfile("toy3", [Layer("a", 0.004, 0.008, 8e6), Layer("b", 0.006, 0.012, 20e6),
                                 Layer("c", 0.002, 0.004, 12e6)], batch_size=32, device="test",
                        source="hand-made for tests")


def run_exact(net, n, steps=30, warmup=6):
    """Simulate a deterministic net of ``n`` workers: one replication is exact."""
    from sgdnet import simulate

    return simulate(net, steps=steps * n, warmup=warmup * n, replications=1, seed=0,
                    parallel=False)


def ps_topology(**kw):
    """Nodes of 4 GPUs with 2 NICs at ``PS_B`` and a fast intra-node link, as ``kw`` changes."""
    from sgdnet import Topology

    base = dict(gpus_per_node=4, nics_per_node=2, nic_bandwidth=PS_B, intra_bandwidth=40 * PS_B,
                intra_latency=3e-6)
    return Topology(**{**base, **kw})


def ps_cases():
    """Cluster keyword sets, by name: plain, heterogeneous speeds, fast/slow PS NICs, update
    costs, and topologies (switch, one slow GPU, leaf-spine 2:1, PCIe)."""
    B, ALPHA = PS_B, PS_ALPHA
    return {
        "plain": dict(workers=5, bandwidth=B, latency=ALPHA, ps_shards=3),
        "speeds": dict(workers=4, bandwidth=B, latency=ALPHA, ps_shards=2,
                       speeds=[1.0, 0.5, 0.8, 1.0]),
        "fast-ps": dict(workers=6, bandwidth=B, ps_bandwidth=8 * B, latency=ALPHA, ps_shards=4),
        "slow-ps": dict(workers=3, bandwidth=B, ps_bandwidth=B / 3, latency=ALPHA, ps_shards=2),
        "update": dict(workers=4, bandwidth=B, latency=ALPHA, ps_shards=2,
                       update_s_per_byte=1e-10, update_s_per_layer=2e-3),
        "topology": dict(workers=8, latency=15e-6, ps_shards=4, topology=ps_topology()),
        "topology-speeds": dict(workers=8, latency=15e-6, ps_shards=2, topology=ps_topology(),
                                speeds=[1.0] * 7 + [0.6]),
        "leaf-spine": dict(workers=16, latency=10e-6, ps_shards=4,
                           topology=ps_topology(fabric="leaf-spine", rack_nodes=2,
                                                oversubscription=2.0)),
        "pcie": dict(workers=8, latency=15e-6, ps_shards=3, topology=ps_topology(intra="pcie")),
    }
