"""The on-disk cache of compiled nets (sgdnet/netcache.py): a hit is the net a build gives,
every input and the code are in the key, damaged files and unwritable folders never fail a run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from conftest import counting_builds

import sgdnet
from sgdnet import Cluster, models, netcache
from sgdnet.cli import main
from sgdnet.net.compiled import compile_net


def _inputs(workers=2, **cluster):
    return models.load("resnet50"), Cluster(workers=workers, **cluster)


def _build(model, cluster, variant="sync-ps", granularity="coarse", options=None):
    def build():
        _build.calls += 1
        return sgdnet.variants.build(variant, model, cluster, granularity, **(options or {}))
    return build


_build.calls = 0


def _forget():
    """Empty the in-memory layer, so that the next call reads the disk."""
    netcache._MEMORY.clear()


def _same(a, b):
    for k, v in vars(a).items():
        if k == "key":  # the inputs' key here, the structural key there
            continue
        w = getattr(b, k)
        if isinstance(v, np.ndarray):
            assert v.dtype == w.dtype and np.array_equal(v, w), k
        else:
            assert v == w, k


def test_a_hit_is_the_compiled_net_of_a_fresh_build():
    model, cluster = _inputs(compute_cv=0.2, comm_cv=0.1)
    before = _build.calls
    cn1, meta1, hit1 = netcache.load_or_build("sync-ps", model, cluster, "coarse", {},
                                              _build(model, cluster))
    _forget()
    cn2, meta2, hit2 = netcache.load_or_build("sync-ps", model, cluster, "coarse", {},
                                              _build(model, cluster))
    assert (hit1, hit2) == (False, True) and _build.calls == before + 1
    fresh = sgdnet.variants.build("sync-ps", model, cluster, "coarse")
    _same(cn2, compile_net(fresh))  # every array, name and tag, from the pickle
    assert meta2 == meta1 == dict(fresh.meta)
    a = sgdnet.simulate(cn2, steps=30, warmup=4, replications=2, seed=5)
    b = sgdnet.simulate(fresh, steps=30, warmup=4, replications=2, seed=5)
    assert not cn2.deterministic and a.throughput.samples[0] != a.throughput.samples[1]
    assert np.array_equal(a.throughput.samples, b.throughput.samples)


@pytest.mark.parametrize("change", ["variant", "granularity", "options", "workers", "bandwidth",
                                    "model", "limits", "code"])
def test_every_input_is_in_the_key(change, monkeypatch):
    model, cluster = _inputs()
    base = netcache.net_key("sync-ps", model, cluster, "coarse", {"staleness": 1})
    assert base == netcache.net_key("sync-ps", model, cluster, "coarse", {"staleness": 1})
    args = ["sync-ps", model, cluster, "coarse", {"staleness": 1}]
    if change == "variant":
        args[0] = "async-ps"
    elif change == "granularity":
        args[3] = "fine"
    elif change == "options":
        args[4] = {"staleness": 2}
    elif change == "workers":
        args[2] = cluster.replace(workers=3)
    elif change == "bandwidth":
        args[2] = cluster.replace(bandwidth="25Gbps")
    elif change == "model":
        args[1] = model.scaled(speed=1.01)
    elif change == "limits":
        monkeypatch.setenv("SGDNET_MAX_NET_BYTES", "12345678")
    else:
        monkeypatch.setitem(netcache._CODE, "sha", "an edited builder")
    assert netcache.net_key(*args) != base


def test_damaged_file_is_rebuilt_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("SGDNET_CACHE_DIR", str(tmp_path))
    model, cluster = _inputs()
    path = tmp_path / "nets" / f"{netcache.net_key('sync-ps', model, cluster, 'coarse', {})}.pkl"
    path.parent.mkdir()
    for junk in (b"", b"\x80\x05garbage", b"not a pickle at all"):
        path.write_bytes(junk)
        _forget()
        cn, _, hit = netcache.load_or_build("sync-ps", model, cluster, "coarse", {},
                                            _build(model, cluster))
        assert not hit and cn.n_transitions > 0
        assert path.stat().st_size > 1000  # a good file took the junk's place
    _forget()
    assert netcache.load_or_build("sync-ps", model, cluster, "coarse", {},
                                  _build(model, cluster))[2]


def test_off_and_unwritable_folders_only_mean_no_caching(tmp_path, monkeypatch):
    model, cluster = _inputs()
    monkeypatch.setenv("SGDNET_CACHE_DIR", "")
    assert netcache.cache_dir() is None
    assert not netcache.load_or_build("sync-ps", model, cluster, "coarse", {},
                                      _build(model, cluster))[2]
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv("SGDNET_CACHE_DIR", str(blocker))
    for _ in range(2):
        _forget()
        cn, _, hit = netcache.load_or_build("sync-ps", model, cluster, "coarse", {},
                                            _build(model, cluster))
        assert not hit and cn.n_transitions > 0
    assert blocker.read_text().startswith("a file")


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("SGDNET_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert netcache.cache_dir() == tmp_path / "sgdnet" / "nets"


def test_oldest_files_are_evicted(tmp_path, monkeypatch):
    monkeypatch.setenv("SGDNET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(netcache, "MAX_FILES", 2)
    model = models.load("resnet50")
    keys = []
    for i, w in enumerate((1, 2, 3)):
        cluster = Cluster(workers=w)
        netcache.load_or_build("sync-ps", model, cluster, "coarse", {}, _build(model, cluster))
        keys.append(netcache.net_key("sync-ps", model, cluster, "coarse", {}))
        p = tmp_path / "nets" / f"{keys[-1]}.pkl"
        os.utime(p, (1e9 + i, 1e9 + i))  # distinct ages whatever the clock's resolution
    left = {p.stem for p in (tmp_path / "nets").glob("*.pkl")}
    assert left == set(keys[1:])


def test_big_nets_are_not_written(tmp_path, monkeypatch):
    monkeypatch.setenv("SGDNET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(netcache, "MAX_ELEMENTS", 10)
    model, cluster = _inputs()
    netcache.load_or_build("sync-ps", model, cluster, "coarse", {}, _build(model, cluster))
    assert not list((tmp_path / "nets").glob("*.pkl"))


def test_cli_second_predict_builds_nothing_and_prints_the_same(capsys, monkeypatch):
    built = counting_builds(monkeypatch)
    argv = ["predict", "--variant", "ssp", "--workers", "2,3", "--json", "--seed", "3",
            "--granularity", "coarse", "--steps", "30", "--warmup", "4", "--replications", "2",
            "--compute-cv", "0.1"]
    outs = []
    for _ in range(2):
        _forget()  # each run a process of its own
        assert main(argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert built == [2, 3]  # the second run loaded both nets
    assert outs[0] == outs[1]
    monkeypatch.setenv("SGDNET_CACHE_DIR", "")  # and a run without the cache agrees
    _forget()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == outs[0] and built == [2, 3, 2, 3]


# ------------------------------------------------------------------ the in-memory layer (predict)
_KW = dict(granularity="coarse", steps=30, warmup=4, replications=2)


def test_predict_again_builds_nothing_and_matches_a_fresh_build(monkeypatch):
    built = counting_builds(monkeypatch)
    cluster = Cluster(workers=3, compute_cv=0.1)
    a = sgdnet.predict("ssp", "resnet50", cluster, seed=1, staleness=2, **_KW)
    b = sgdnet.predict("ssp", "resnet50", cluster, seed=2, staleness=2, **_KW)  # other seed: hit
    assert built == [3]
    _forget()
    c = sgdnet.predict("ssp", "resnet50", cluster, seed=2, staleness=2, **_KW)
    assert built == [3, 3]
    assert np.array_equal(b.steps_per_s.samples, c.steps_per_s.samples)
    assert not np.array_equal(a.steps_per_s.samples, b.steps_per_s.samples)
    assert b.meta == c.meta
    b.meta["mine"] = 1  # a caller's edit of one prediction's meta is not the next one's
    b.meta["options"]["mine"] = 1
    d = sgdnet.predict("ssp", "resnet50", cluster, seed=2, staleness=2, **_KW).meta
    assert "mine" not in d and "mine" not in d["options"]
    sgdnet.predict("ssp", "resnet50", cluster, seed=2, staleness=3, **_KW)  # other options: built
    sgdnet.predict("ssp", "resnet50", cluster.replace(bandwidth="1Gbps"), seed=2, staleness=2,
                   **_KW)
    assert built == [3, 3, 3, 3]
    assert not list(netcache.cache_dir().parent.rglob("*.pkl"))  # the Python API writes no file


def test_memory_layer_is_bounded_in_count_and_size(monkeypatch):
    built = counting_builds(monkeypatch)
    monkeypatch.setattr(netcache, "MEMORY_NETS", 2)
    for w in (1, 2, 3, 1):  # 1 was the oldest when 3 came
        sgdnet.predict("allreduce", "resnet50", Cluster(workers=w), **_KW)
    assert built == [1, 2, 3, 1] and len(netcache._MEMORY) == 2
    monkeypatch.setattr(netcache, "MEMORY_MAX_ELEMENTS", 10)
    _forget()
    for _ in range(2):
        sgdnet.predict("allreduce", "resnet50", Cluster(workers=2), **_KW)
    assert built[-2:] == [2, 2] and not netcache._MEMORY


def test_bad_options_fail_every_time(monkeypatch):
    built = counting_builds(monkeypatch)
    for _ in range(2):
        with pytest.raises(sgdnet.SgdnetError, match="staleness"):
            sgdnet.predict("ssp", "resnet50", Cluster(workers=2), staleness=-1, **_KW)
    # predict resolves the options (for the memory per GPU) before it builds: refused there
    assert built == [] and not netcache._MEMORY
    # a build that fails inside the cache is refused every time and never kept either
    model, cluster = models.load("resnet50"), Cluster(workers=2)
    for _ in range(2):
        with pytest.raises(sgdnet.SgdnetError, match="staleness"):
            netcache.load_or_build("ssp", model, cluster, "coarse", {"staleness": -1},
                                   lambda: sgdnet.variants.build("ssp", model, cluster,
                                                                 granularity="coarse",
                                                                 staleness=-1))
    assert built == [2, 2] and not netcache._MEMORY


def test_an_option_value_its_repr_does_not_tell_apart_is_never_cached(monkeypatch):
    built = counting_builds(monkeypatch)
    cluster = Cluster(workers=2)
    model = models.load("resnet50")
    netcache.load_or_build("ssp", model, cluster, "coarse", {}, _build(model, cluster, "ssp"))
    opaque = {"x": np.arange(3000)}  # its repr elides the middle: no key can be trusted
    for _ in range(2):
        netcache.load_or_build("ssp", model, cluster, "coarse", opaque,
                               _build(model, cluster, "ssp"))
    assert built == [2, 2, 2] and len(netcache._MEMORY) == 1
