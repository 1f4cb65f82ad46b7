"""Profiles from real PyTorch runs: live hooks and a torch.profiler trace made here."""

import json
import statistics

import pytest

from sgdnet.errors import ProfileError

torch = pytest.importorskip("torch")

# these traces are CPU-only on purpose: from_chrome_trace warns that their times include the
# profiler's overhead (tested in test_profiling_device.py)
pytestmark = pytest.mark.filterwarnings("ignore:.*no device activities:UserWarning")
from torch import nn  # noqa: E402

from sgdnet.profiling import from_chrome_trace, profile_module  # noqa: E402


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def n_params(m):
    return sum(p.numel() for p in m.parameters())


def test_profile_module_mlp():
    m = mlp()
    x = torch.randn(32, 128)
    p = profile_module(m, x, repeats=5, warmup=1)
    assert p.grad_bytes == 4 * n_params(m)
    assert [la.grad_bytes for la in p.layers] == [4 * (128 * 256 + 256), 4 * (256 * 256 + 256),
                                                   4 * (256 * 10 + 10)]
    assert p.n_layers == 3                      # ReLUs folded into the preceding Linear
    assert p.batch_size == 32 and p.device == "cpu"
    for la in p.layers:
        assert la.forward_s > 0 and la.backward_s > 0
        assert la.cv is not None and la.cv >= 0
    assert len(p.meta["step_s"]) == 5
    # gradients are left cleared, the hooks removed
    assert all(q.grad is None for q in m.parameters())
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.modules())


def test_profile_module_options():
    m = mlp()
    x = torch.randn(16, 128)
    raw = profile_module(m, x, repeats=3, overhead="none", fold_parameterless=False)
    assert raw.n_layers == 5
    assert [la.grad_bytes == 0 for la in raw.layers] == [False, True, False, True, False]
    assert raw.compute_s <= raw.meta["step_mean_s"] * 1.0001
    one = profile_module(m, (x,), repeats=1, loss_fn=lambda out: out.pow(2).mean(), name="m",
                         batch_size=7)
    assert one.name == "m" and one.batch_size == 7
    assert all(la.cv is None for la in one.layers)   # no CV from a single repeat


@pytest.mark.parametrize("kw, pat", [({"repeats": 0}, "repeats"), ({"warmup": -1}, "warmup"),
                                     ({"overhead": "some"}, "overhead")])
def test_profile_module_bad_args(kw, pat):
    with pytest.raises(ProfileError, match=pat):
        profile_module(mlp(), torch.randn(2, 128), **kw)


def test_profile_module_rejects_non_module_and_frozen():
    with pytest.raises(ProfileError, match="nn.Module"):
        profile_module(lambda x: x, torch.randn(2, 2))
    m = mlp().requires_grad_(False)
    with pytest.raises(ProfileError, match="requires_grad"):
        profile_module(m, torch.randn(2, 128))


def make_trace(path, *, with_stack=True, record_shapes=True, steps=3):
    from torch.profiler import ProfilerActivity, profile, schedule

    m = mlp()
    x = torch.randn(64, 128)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    with profile(activities=[ProfilerActivity.CPU], with_stack=with_stack,
                 record_shapes=record_shapes, with_modules=True,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
        for _ in range(steps + 1):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
            prof.step()
    return m


def _steps_and_module_spans(path):
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
    leaf = [e for e in ev if e["name"].startswith("nn.Module: ")
            and not e["name"].startswith("nn.Module: Sequential")]
    per_step = [sum(e["dur"] for e in leaf
                    if s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"])
                for s in steps]
    return [s["dur"] * 1e-6 for s in steps], [x * 1e-6 for x in per_step]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "mlp_trace.json"
    m = make_trace(path)
    return path, m


def test_from_chrome_trace_step_time_and_bytes(trace):
    path, m = trace
    steps, _ = _steps_and_module_spans(path)
    assert len(steps) == 3
    p = from_chrome_trace(path, batch_size=64)
    assert p.name == "mlp_trace" and p.batch_size == 64
    assert [la.name for la in p.layers] == ["Linear_0", "Linear_1", "Linear_2"]
    assert p.grad_bytes == 4 * n_params(m)       # from the AccumulateGrad shapes
    assert p.compute_s == pytest.approx(statistics.fmean(steps), rel=0.03)
    for la in p.layers:
        assert la.forward_s > 0 and la.backward_s > 0 and la.cv is not None


def test_from_chrome_trace_raw_spans(trace):
    path, _ = trace
    steps, module_fwd = _steps_and_module_spans(path)
    p = from_chrome_trace(path, overhead="none")
    # forward = the leaf module spans (Linear + the ReLUs folded into them)
    assert p.forward_s == pytest.approx(statistics.fmean(module_fwd), rel=1e-6)
    # the layer spans cover the forward spans (read here from the trace) and backward ones, and no
    # more than the steps (a bound that holds however loaded the machine that recorded it was)
    assert statistics.fmean(module_fwd) / statistics.fmean(steps) < p.meta["covered_fraction"] <= 1.0
    assert p.compute_s < statistics.fmean(steps)


def test_from_chrome_trace_without_shapes(tmp_path):
    path = tmp_path / "noshapes.json"
    make_trace(path, record_shapes=False, steps=2)
    with pytest.raises(ProfileError, match="record_shapes"):
        from_chrome_trace(path)
    sizes = {"Linear_0": 1.0, "Linear_1": 2.0, "Linear_2": 3.0}
    p = from_chrome_trace(path, grad_bytes=sizes)
    assert [la.grad_bytes for la in p.layers] == [1.0, 2.0, 3.0]
    with pytest.raises(ProfileError, match="Linear_9"):
        from_chrome_trace(path, grad_bytes={"Linear_9": 1})


def test_from_chrome_trace_without_module_spans(tmp_path):
    path = tmp_path / "nostack.json"
    make_trace(path, with_stack=False, steps=1)
    with pytest.raises(ProfileError, match="with_stack=True"):
        from_chrome_trace(path)


def test_from_chrome_trace_record_function_layers(tmp_path):
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    a, b = nn.Linear(32, 64), nn.Linear(64, 8)
    x = torch.randn(8, 32)
    path = tmp_path / "rf.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
        for _ in range(3):
            with record_function("enc"):
                h = a(x).relu()
            with record_function("head"):
                y = b(h)
            y.sum().backward()
            prof.step()
    p = from_chrome_trace(path)
    assert [la.name for la in p.layers] == ["enc", "head"]
    assert [la.grad_bytes for la in p.layers] == [4 * (32 * 64 + 64), 4 * (64 * 8 + 8)]


def test_from_chrome_trace_bad_files(tmp_path):
    f = tmp_path / "broken.json"
    f.write_text("{not json")
    with pytest.raises(ProfileError, match="broken.json.*not valid JSON"):
        from_chrome_trace(f)
    f.write_text(json.dumps({"events": []}))
    with pytest.raises(ProfileError, match="traceEvents"):
        from_chrome_trace(f)
    f.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": 0, "dur": -3}]}))
    with pytest.raises(ProfileError, match=r"traceEvents\[0\]\.dur"):
        from_chrome_trace(f)
    with pytest.raises(ProfileError, match="cannot read"):
        from_chrome_trace(tmp_path / "missing.json")
    with pytest.raises(ProfileError, match="overhead"):
        from_chrome_trace(f, overhead="all")
