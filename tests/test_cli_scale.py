"""The CLI at scale (issues #41, #43): the compact on-disk form of compiled nets (every net
written, big ones included: a loaded net is the compiled net of a fresh build, field for
field, and runs alike; a file damaged anywhere is found by its CRC, reported once and rebuilt;
the cache keeps to its byte budget), the run-size bound checked before a net is built (it
refuses what ``simulate`` would refuse, in a second, and never what it would allow), and a
``sgdnet predict`` that does not import the testbed."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from conftest import counting_builds

import sgdnet
from sgdnet import Cluster, models, netcache, variants
from sgdnet.cli import main
from sgdnet.engine.api import check_run_work
from sgdnet.errors import SimulationError
from sgdnet.net.compiled import CompiledNet, compile_net
from sgdnet.variants.budget import run_work_floor, spec_work_check


def _forget():
    netcache._MEMORY.clear()
    netcache._REPORTED.clear()


def _same(a, b):
    """Every field of compiled net ``a`` is ``b``'s: arrays of the same dtype, shape and bits,
    read-only and contiguous; lists of the same items of the same types."""
    assert list(vars(a)) == [k for k in vars(b) if not k.startswith("_")]
    for k, v in vars(a).items():
        if k == "key":
            continue
        w = getattr(b, k)
        if isinstance(w, np.ndarray):
            assert v.dtype == w.dtype and v.shape == w.shape, k
            assert v.tobytes() == w.tobytes(), k
            assert v.flags.c_contiguous and not v.flags.writeable, k
        else:
            assert type(v) is type(w) and v == w, k
            if isinstance(w, list):
                assert [type(x) for x in v] == [type(x) for x in w], k


def _roundtrip(cn):
    return netcache._unpack(CompiledNet, pickle.loads(pickle.dumps(netcache._pack(cn))))


# ------------------------------------------------------------------ the compact form
@pytest.mark.parametrize("variant, workers, kw", [
    ("sync-ps", 16, dict(granularity="fine")),
    ("dssp", 4, dict(granularity="fine")),  # gates
    ("allreduce", 8, dict(granularity="fine")),
    ("async-ps", 3, dict(granularity="coarse")),
])
def test_the_compact_form_gives_back_every_field(variant, workers, kw):
    cluster = Cluster(workers=workers, compute_cv=0.1,
                      straggler=sgdnet.StepSlowdown(p=0.1, factor=3.0))  # modulators
    cn = compile_net(variants.build(variant, "resnet50", cluster, **kw), share=False)
    _same(_roundtrip(cn), cn)


def test_odd_values_keep_their_types_and_bits():
    class Box:
        pass

    box = Box()
    box.__dict__.update(
        neg_zero=np.full(100, -0.0), nan=np.full((70, 3), np.nan), empty=np.zeros(0),
        small_neg=np.array([-5, 3, -128, 127], dtype=np.int64),
        big_u=np.array([0, 2**63 + 5], dtype=np.uint64),
        rows=np.repeat(np.array([[0.0, -0.0, 1.5], [2.0, 3.0, np.inf]]), 50, axis=0),
        flags=np.array([True, False, True]),
        names=["a", "b\x00c", ""],  # a name holding the separator: kept as a list
        names2=["x", "", "y"], nothing=[],
        tags=[{"worker": 1, "step": True}, {"kind": "comm"}, {}, {"worker": 2, "step": False}],
        odd_keys=[{1: "a"}, {True: "b"}],  # 1 == True as keys: kept as they are
        tuples=[("a", "b"), ("a",), ("a", "b")], int_tuples=[(1,), (True,)],
        plain={"k": (1, 2)}, name="n", flag=False)
    back = netcache._unpack(Box, pickle.loads(pickle.dumps(netcache._pack(box))))
    for k, v in vars(box).items():
        w = getattr(back, k)
        if isinstance(v, np.ndarray):
            assert w.dtype == v.dtype and w.shape == v.shape and w.tobytes() == v.tobytes(), k
        else:
            assert w == v and type(w) is type(v), k
            if isinstance(v, list):
                assert [type(x) for x in w] == [type(x) for x in v], k
                assert all(type(a) is type(b) for x, y in zip(v, w) if isinstance(x, dict)
                           for a, b in zip(x, y)), k
    assert netcache._pack_value(box.neg_zero)[0] == "const"
    assert netcache._pack_value(box.small_neg)[0] == "narrow"
    assert netcache._pack_value(box.rows)[0] == "rows"
    assert netcache._pack_value(box.names)[0] == "plain"
    assert netcache._pack_value(box.odd_keys)[0] == "plain"
    assert netcache._pack_value(box.int_tuples)[0] == "plain"


def _cli_argv(workers="64", extra=()):
    return ["predict", "--variant", "sync-ps", "--workers", workers, "--steps", "5",
            "--warmup", "2", "--json", "--no-progress", *extra]


def _files():
    return sorted(netcache.cache_dir().glob("*.pkl"))


def test_a_cached_fine_net_is_a_rebuilt_one_and_smaller_than_its_pickle(capsys, monkeypatch):
    built = counting_builds(monkeypatch)
    outs = []
    for _ in range(2):
        _forget()  # each run a process of its own
        assert main(_cli_argv()) == 0
        outs.append(json.loads(capsys.readouterr().out))
    # the first run counted the run's size on 4, 8 and 12 workers, then built; the second
    # loaded the net and counted nothing
    assert built == [4, 8, 12, 64] and outs[0] == outs[1]
    private = os.environ["SGDNET_CACHE_DIR"]
    monkeypatch.setenv("SGDNET_CACHE_DIR", "")  # no cache at all: the same figures
    _forget()
    assert main(_cli_argv()) == 0
    assert json.loads(capsys.readouterr().out) == outs[0]
    monkeypatch.setenv("SGDNET_CACHE_DIR", private)
    (path,) = _files()
    fresh = compile_net(variants.build("sync-ps", "resnet50", Cluster(workers=64)), share=False)
    _forget()
    cn, _ = netcache._load(path)
    _same(cn, fresh)
    assert path.stat().st_size < 0.5 * len(pickle.dumps(fresh, protocol=5))


def test_nets_over_the_old_size_threshold_are_written():
    # 200,000 elements was the old threshold (issue #41: the 1,024-worker net was rebuilt every
    # run); MAX_ELEMENTS is above any fine net the default memory budget lets a build make
    per_element = sgdnet.variants.budget.BYTES_PER_ELEMENT
    assert netcache.MAX_ELEMENTS * per_element > sgdnet.limits.limit("max_net_bytes")


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "magic", "append"])
def test_a_file_damaged_anywhere_is_reported_once_and_rebuilt(damage, capsys, monkeypatch):
    built = counting_builds(monkeypatch)
    _forget()
    assert main(_cli_argv("16")) == 0
    good = capsys.readouterr().out
    (path,) = _files()
    data = bytearray(path.read_bytes())
    if damage == "flip":  # one byte inside the body: the pickle would still load
        data[len(data) * 2 // 3] ^= 0x10
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    elif damage == "magic":
        data[0] ^= 0xFF
    else:
        data += b"junk"
    path.write_bytes(bytes(data))
    _forget()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(_cli_argv("16")) == 0
    assert capsys.readouterr().out == good and built == [16, 16]  # rebuilt, same figures
    warned = [w for w in seen if issubclass(w.category, netcache.NetCacheWarning)]
    assert len(warned) == 1 and path.name in str(warned[0].message)
    _forget()
    assert main(_cli_argv("16")) == 0 and built == [16, 16]  # the rebuilt file is whole


def test_the_cache_keeps_to_its_byte_budget(monkeypatch):
    model = models.load("resnet50")
    sizes = {}
    for w in (2, 3, 4):
        c = Cluster(workers=w)
        netcache.load_or_build("sync-ps", model, c, "coarse", {},
                               lambda c=c: variants.build("sync-ps", model, c, "coarse"))
        (new,) = set(_files()) - set(sizes)
        sizes[new] = new.stat().st_size
        os.utime(new, (1e9 + w, 1e9 + w))  # distinct ages whatever the clock's resolution
    first, second, third = sizes
    assert set(_files()) == {first, second, third}
    # a budget for the two newest: the next write evicts the least recently used
    monkeypatch.setenv("SGDNET_MAX_NET_CACHE_BYTES", str(sizes[second] + sizes[third] + 10))
    os.utime(first, (1e9 + 10, 1e9 + 10))  # now the most recently used
    c = Cluster(workers=2, bandwidth="1Gbps")
    _forget()
    netcache.load_or_build("sync-ps", model, c, "coarse", {},
                           lambda: variants.build("sync-ps", model, c, "coarse"))
    left = set(_files())
    assert first in left and second not in left and len(left) == 2
    assert sum(p.stat().st_size for p in left) <= sizes[second] + sizes[third] + 10
    # a net bigger than the whole budget is not written (and evicts nothing)
    monkeypatch.setenv("SGDNET_MAX_NET_CACHE_BYTES", "100")
    c = Cluster(workers=5)
    netcache.load_or_build("sync-ps", model, c, "coarse", {},
                           lambda: variants.build("sync-ps", model, c, "coarse"))
    assert set(_files()) == left
    # the budget changes no net: it is not in the key
    key = netcache.net_key("sync-ps", model, c, "coarse", {})
    monkeypatch.delenv("SGDNET_MAX_NET_CACHE_BYTES")
    assert netcache.net_key("sync-ps", model, c, "coarse", {}) == key


def test_a_big_net_is_compacted_and_written_in_the_background_from_a_snapshot(monkeypatch):
    monkeypatch.setattr(netcache, "COMPACT_FROM", 10)  # every net "big"
    model, cluster = models.load("resnet50"), Cluster(workers=4, compute_cv=0.1)
    cn, meta, hit = netcache.load_or_build(
        "sync-ps", model, cluster, "fine", {},
        lambda: variants.build("sync-ps", model, cluster, "fine"))
    # its names, tags and tuples made anew: still the compiled net of a fresh build
    _same(cn, compile_net(variants.build("sync-ps", model, cluster, "fine"), share=False))
    cn._learned = object()  # what a run adds meanwhile (unpicklable): not in the file
    meta["mine"] = 1  # the caller's copy of meta: not the file's
    netcache.flush()
    assert not hit and not netcache._WRITERS
    _forget()
    cn2, meta2, hit2 = netcache.load_or_build("sync-ps", model, cluster, "fine", {},
                                              lambda: pytest.fail("built again"))
    assert hit2 and "mine" not in meta2 and not hasattr(cn2, "_learned")
    del cn._learned
    _same(cn2, cn)
    a = sgdnet.simulate(cn2, steps=40, warmup=8, replications=2, seed=3)
    b = sgdnet.simulate(variants.build("sync-ps", model, cluster, "fine"), steps=40, warmup=8,
                        replications=2, seed=3)
    assert np.array_equal(a.throughput.samples, b.throughput.samples)


def test_a_cached_net_built_with_fewer_layer_groups_says_so_as_its_build_did(capsys,
                                                                             monkeypatch):
    monkeypatch.setenv("SGDNET_MAX_NET_BYTES", str(100_000_000))  # 96 workers x 107 layers: over
    built = counting_builds(monkeypatch)
    said, outs = [], []
    for _ in range(2):
        _forget()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert main(_cli_argv("96")) == 0
        outs.append(capsys.readouterr().out)
        said.append([str(w.message) for w in seen if "max_net_bytes" in str(w.message)])
    assert built.count(96) == 1 and outs[0] == outs[1]  # the second run loaded the net
    assert len(said[0]) == 1 and said[0] == said[1]
    assert "sync-ps on 96 workers: the fine net of all 107 layers" in said[0][0]


# ------------------------------------------------------------------ the bound before the build
def _engine_estimate(cn, step_completions, replications):
    """check_run_work's count, as its docstring states it: transitions x ceil(step completions
    / step transitions) x runs (one for a net without randomness)."""
    runs = 1 if cn.deterministic else replications
    return cn.n_transitions * -(-step_completions // len(cn.step_transitions)) * runs


CASES = [(v, g, {}) for v in variants.names() for g in ("fine", "coarse")] + [
    (v, "fine", {"max_layers": 1}) for v in variants.names()
    if "max_layers" in variants.get(v).option_names()]


@pytest.mark.parametrize("variant, granularity, options", CASES)
def test_the_bound_never_refuses_what_simulate_allows(variant, granularity, options,
                                                      monkeypatch):
    # with max_layers=1 the net is what the memory budget builds at its smallest, where the
    # bound is closest to the engine's count (within 2 % on 48 workers)
    n, steps, warmup, reps = 48, 3, 2, 4
    cluster = Cluster(workers=n, compute_cv=0.05 if granularity == "fine" else 0.0)
    model = models.load("resnet50")
    spec = variants.get(variant)
    try:
        cn = compile_net(spec.build(model, cluster, granularity, **options), share=False)
    except sgdnet.SgdnetError:
        pytest.skip(f"{variant} does not build with its defaults on {n} workers")
    sc = (steps + warmup) * n
    exact = _engine_estimate(cn, sc, reps)
    monkeypatch.setenv("SGDNET_MAX_RUN_EVENTS", str(exact))
    check_run_work(cn, sc, 1 if cn.deterministic else reps)  # the engine allows it ...
    spec_work_check(spec, model, cluster, granularity, dict(options), steps, warmup, reps)
    monkeypatch.setenv("SGDNET_MAX_RUN_EVENTS", str(exact - 1))
    with pytest.raises(SimulationError, match="max_run_events"):  # the engine's number
        check_run_work(cn, sc, 1 if cn.deterministic else reps)


def test_the_bound_is_tight_for_a_parameter_server_in_one_layer_group():
    n = 96
    model = models.load("resnet50")
    cluster = Cluster(workers=n)
    spec = variants.get("sync-ps")
    cn = compile_net(spec.build(model, cluster, "fine", max_layers=1), share=False)
    sc = 25 * n
    floor = run_work_floor(lambda c, one: spec.build(model, c, "fine", max_layers=1), cluster,
                           sc, 8, fine=True)
    assert floor["small"] == [4, 8, 12] and floor["runs"] == 1  # no randomness: played once
    exact = _engine_estimate(cn, sc, 8)
    assert 0.99 * exact <= floor["completions"] <= exact


def test_no_bound_when_the_cluster_cannot_shrink_or_counts_are_off_their_line():
    model = models.load("resnet50")
    spec = variants.get("sync-ps")
    build = lambda c, one: spec.build(model, c, "coarse")  # noqa: E731
    assert run_work_floor(build, Cluster(workers=40), 10**6, 1, fine=False) is None  # < 12 x 4
    strag = Cluster(workers=64, straggler=sgdnet.StepSlowdown(p=0.1, factor=2.0))
    assert run_work_floor(build, strag, 10**6, 1, fine=False) is None
    assert run_work_floor(lambda c, one: 1 / 0, Cluster(workers=64), 10**6, 1,  # a failing build
                          fine=False) is None
    sizes = iter([10, 30, 40])  # not on a line
    assert run_work_floor(lambda c, one: _net_of(next(sizes)), Cluster(workers=64), 10**6, 1,
                          fine=False) is None


def _net_of(k):
    net = sgdnet.Net("k")
    p = net.place("p", tokens=1)
    for i in range(k):
        net.transition(f"t{i}", 1.0, inputs={p: 1}, outputs={p: 1}, tags={"step": i == 0})
    return net


def test_the_cli_refuses_65536_workers_before_building(tmp_path):
    env = {**os.environ, "SGDNET_MAX_RUN_EVENTS": str(10**8)}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "sgdnet.cli", "predict", "--model", "resnet50",
                        "--variant", "sync-ps", "--workers", "65536", "--bandwidth", "10Gbps"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "workers=65,536" in lines[0] and "SGDNET_MAX_RUN_EVENTS" in lines[0]
    assert "fewer workers, steps or replications" in lines[0]
    assert time.monotonic() - t0 < 60


def test_predict_refuses_65536_workers_without_building_them(monkeypatch):
    built = counting_builds(monkeypatch)
    with pytest.raises(SimulationError, match=r"workers=65,536.*SGDNET_MAX_RUN_EVENTS"):
        sgdnet.predict("sync-ps", "resnet50", Cluster(workers=65536), steps=100_000, warmup=0)
    assert built == [4, 8, 12]  # the small clusters only


def test_a_run_the_bound_allows_is_left_to_simulate(monkeypatch):
    # 48 workers, one layer group: the bound is below the engine's count (its intercept), so
    # with the limit at the bound the run is not refused up front but by simulate itself
    model, cluster = models.load("resnet50"), Cluster(workers=48)
    spec = variants.get("sync-ps")
    floor = run_work_floor(lambda c, one: spec.build(model, c, "fine", max_layers=1), cluster,
                           7 * 48, 2, fine=True)
    cn = compile_net(spec.build(model, cluster, "fine", max_layers=1), share=False)
    assert floor["completions"] < _engine_estimate(cn, 7 * 48, 2)
    monkeypatch.setenv("SGDNET_MAX_RUN_EVENTS", str(floor["completions"]))
    built = counting_builds(monkeypatch)
    with pytest.raises(SimulationError, match="this run would play about"):  # simulate's words
        sgdnet.predict("sync-ps", model, cluster, steps=5, warmup=2, replications=2,
                       max_layers=1)
    assert 48 in built


# ------------------------------------------------------------------ start-up
def test_predict_does_not_import_the_testbed():
    code = ("import sys, io, contextlib\n"
            "from sgdnet.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['models']) == 0\n"
            "print('sgdnet.testbed' in sys.modules)\n"
            "try:\n"
            "    main(['testbed', '--help'])\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.splitlines()[0] == "False", p.stderr
    assert "usage: sgdnet testbed" in p.stdout
