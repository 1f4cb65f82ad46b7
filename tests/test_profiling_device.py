"""from_chrome_trace on a GPU trace: layer times are the GPU activities each layer launched
(Kineto device events linked to their launches by correlation id), not the CPU spans.

The trace is synthetic (no GPU here) but has the structure torch.profiler writes with
activities=[CPU, CUDA]: module spans and ops on the main thread, autograd on its own thread,
cudaLaunchKernel runtime events and kernels on the device carrying the same correlation id.
"""

import json

import pytest

from sgdnet.errors import ProfileError
from sgdnet.profiling import from_chrome_trace


def X(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}


def launch_and_kernel(corr, at, tid, start, dur):
    """A cudaLaunchKernel at CPU time `at` on `tid`, running on the GPU from `start`."""
    return [X("cuda_runtime", "cudaLaunchKernel", at, 1, tid=tid, correlation=corr),
            X("kernel", f"gemm_{corr}", start, dur, tid=7, pid=0, correlation=corr, device=0)]


EVAL = "autograd::engine::evaluate_function: "


def gpu_trace(path, kernel_us=(300, 150, 10, 400, 600)):
    k0, k1, kl, kb1, kb0 = kernel_us
    ev = [X("user_annotation", "ProfilerStep#1", 0, 2000),
          # forward, main thread: two Linear layers, their addmm ops and launches
          X("python_function", "nn.Module: Linear_0", 10, 50),
          X("cpu_op", "aten::addmm", 20, 30, **{"Sequence number": 100}),
          X("python_function", "nn.Module: Linear_1", 70, 50),
          X("cpu_op", "aten::addmm", 80, 30, **{"Sequence number": 101}),
          X("cpu_op", "aten::sum", 130, 10),                      # the loss, no layer
          # backward, autograd thread 2
          X("cpu_op", EVAL + "AddmmBackward0", 300, 100, tid=2, **{"Sequence number": 101}),
          X("cpu_op", EVAL + "torch::autograd::AccumulateGrad", 400, 10, tid=2),
          X("cpu_op", "torch::autograd::AccumulateGrad", 401, 8, tid=2,
            **{"Input Dims": [[64, 32]], "Input type": ["float"]}),
          X("cpu_op", EVAL + "AddmmBackward0", 420, 80, tid=2, **{"Sequence number": 100}),
          X("cpu_op", EVAL + "torch::autograd::AccumulateGrad", 500, 10, tid=2),
          X("cpu_op", "torch::autograd::AccumulateGrad", 501, 8, tid=2,
            **{"Input Dims": [[32, 16]], "Input type": ["float"]})]
    ev += launch_and_kernel(1, 25, 1, 200, k0)
    ev += launch_and_kernel(2, 85, 1, 500, k1)
    ev += launch_and_kernel(3, 132, 1, 650, kl)
    ev += launch_and_kernel(4, 310, 2, 700, kb1)
    ev += launch_and_kernel(5, 430, 2, 1100, kb0)
    path.write_text(json.dumps({"traceEvents": ev,
                                "deviceProperties": [{"name": "NVIDIA A100-SXM4-80GB"}]}))
    return path


def test_layer_times_are_the_kernels_they_launched(tmp_path):
    p = from_chrome_trace(gpu_trace(tmp_path / "g.json"), overhead="none")
    assert p.meta["times"] == "device" and p.device == "NVIDIA A100-SXM4-80GB"
    assert [la.name for la in p.layers] == ["Linear_0", "Linear_1"]
    assert [la.forward_s for la in p.layers] == pytest.approx([300e-6, 150e-6])
    assert [la.backward_s for la in p.layers] == pytest.approx([600e-6, 400e-6])
    assert [la.grad_bytes for la in p.layers] == [4 * 32 * 16, 4 * 64 * 32]
    # device span of the step: first kernel at 200 us, last ends at 1100 + 600 us
    assert p.meta["step_s"] == pytest.approx([1500e-6])


def test_proportional_overhead_spreads_device_idle_time(tmp_path):
    p = from_chrome_trace(gpu_trace(tmp_path / "g.json"))
    # forward phase on the device: 200 us .. 700 us (first kernel launched by the backward),
    # 500 us against 450 us of layer kernels; backward phase 700 .. 1700 us = its kernels
    assert [la.forward_s for la in p.layers] == pytest.approx([300e-6 * 500 / 450,
                                                               150e-6 * 500 / 450])
    assert [la.backward_s for la in p.layers] == pytest.approx([600e-6, 400e-6])
    assert p.compute_s == pytest.approx(1500e-6)


def test_cpu_times_on_request_with_a_warning(tmp_path):
    f = gpu_trace(tmp_path / "g.json")
    with pytest.warns(UserWarning, match="kernel launches"):
        p = from_chrome_trace(f, overhead="none", times="cpu")
    assert [la.forward_s for la in p.layers] == pytest.approx([50e-6, 50e-6])
    assert [la.backward_s for la in p.layers] == pytest.approx([80e-6 + 10e-6, 100e-6 + 10e-6])


def test_device_times_need_device_activities(tmp_path):
    f = gpu_trace(tmp_path / "g.json")
    d = json.loads(f.read_text())
    d["traceEvents"] = [e for e in d["traceEvents"] if e["cat"] != "kernel"]
    f.write_text(json.dumps(d))
    with pytest.raises(ProfileError, match="ProfilerActivity.CUDA"):
        from_chrome_trace(f, times="device")
    with pytest.warns(UserWarning, match="profiler's own per-operator overhead"):
        assert from_chrome_trace(f).meta["times"] == "cpu"      # auto: CPU-only trace
    with pytest.raises(ProfileError, match="times="):
        from_chrome_trace(f, times="gpu")


torch = pytest.importorskip("torch")


class FakeCuda:
    """torch.cuda's Event/synchronize on the host clock: what the event path computes with."""

    syncs = 0

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            import time
            self.t = time.perf_counter()

        def elapsed_time(self, other):                       # milliseconds, like CUDA
            return (other.t - self.t) * 1e3

    @classmethod
    def synchronize(cls, device=None):
        cls.syncs += 1


def test_profile_module_event_clock_path(monkeypatch):
    from types import SimpleNamespace

    from sgdnet.profiling import profile_module, torch_hooks

    fake = SimpleNamespace(cuda=FakeCuda)
    monkeypatch.setattr(torch_hooks, "_WallClock",
                        lambda: torch_hooks._CudaEventClock(fake, "cuda:0"))
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    p = profile_module(m, torch.randn(16, 64), repeats=3, warmup=1, overhead="none")
    assert FakeCuda.syncs == 3                     # one synchronisation per measured step
    assert p.n_layers == 2 and all(la.forward_s > 0 and la.backward_s > 0 for la in p.layers)
    assert p.compute_s <= p.meta["step_mean_s"] * 1.0001
    # per-tensor sizes: weight and bias of each Linear, registration order
    assert [(t.name, t.nbytes) for t in p.layers[0].tensors] == [("weight", 4 * 64 * 128),
                                                                 ("bias", 4 * 128)]
    assert len(p.messages("tensor")) == 4 and p.messages("tensor")[0].name.endswith(".bias")


def test_profile_module_keeps_loss_and_optimizer_out_of_the_layers():
    import time

    from sgdnet.profiling import profile_module

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(8, 32)

    # sleeps are wall time that CPU load cannot shrink: known lower bounds on a busy machine
    def slow_loss(out):
        time.sleep(0.3)
        return out.sum()

    class SlowSGD(torch.optim.SGD):
        def step(self, closure=None):
            time.sleep(0.05)
            return super().step(closure)

    before = [p.detach().clone() for p in m.parameters()]
    opt = SlowSGD(m.parameters(), lr=0.1, momentum=0.9)
    sep = profile_module(m, x, repeats=3, warmup=1, loss_fn=slow_loss, overhead="separate",
                         optimizer=opt)
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))  # it trained
    assert sep.loss_s >= 0.3 and sep.update_s >= 0.05 and sep.zero_grad_s >= 0
    per_byte = [t.update_s / t.nbytes for la in sep.layers for t in la.tensors]
    assert max(per_byte) == pytest.approx(min(per_byte))            # apportioned by bytes
    # with overhead="proportional" the loss's 0.3 s is spread into the layers instead
    prop = profile_module(m, x, repeats=3, warmup=1, loss_fn=slow_loss)
    assert prop.loss_s == 0 and prop.update_s == 0
    assert prop.compute_s >= 0.3 > sep.compute_s
    with pytest.raises(Exception, match="optimizer must be"):
        profile_module(m, x, repeats=1, optimizer=object())


def test_separate_overhead_keeps_optimizer_spans_out_of_the_layers_on_device(tmp_path):
    f = gpu_trace(tmp_path / "g.json")
    d = json.loads(f.read_text())
    d["traceEvents"] += [X("user_annotation", "Optimizer.step#SGD.step", 1500, 100)]
    d["traceEvents"] += launch_and_kernel(6, 1510, 1, 1800, 50)
    f.write_text(json.dumps(d))
    p = from_chrome_trace(f, overhead="separate")
    assert p.optimizer_s == pytest.approx(50e-6) and p.zero_grad_s == 0
    # backward phase 700 .. 1850 us minus the 50 us step: 1100 us over 1000 us of layers
    assert [la.backward_s for la in p.layers] == pytest.approx([660e-6, 440e-6])
    assert p.step_s == pytest.approx(1650e-6) == pytest.approx(p.meta["step_s"][0])


def test_separate_overhead_on_a_real_cpu_trace(tmp_path):
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(16, 64)
    path = tmp_path / "t.json"
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda prof: prof.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
            prof.step()
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]

    def mean_span(prefix):   # per step, from the raw events
        return sum(e["dur"] for e in ev if e["name"].startswith(prefix)
                   and any(s["ts"] <= e["ts"] <= s["ts"] + s["dur"] for s in steps)) \
            / len(steps) * 1e-6

    with pytest.warns(UserWarning, match="no device activities"):  # a CPU trace says so
        p = from_chrome_trace(path, overhead="separate")
    # one tensor per AccumulateGrad, in registration order (weight, then bias)
    assert [[t.nbytes for t in la.tensors] for la in p.layers] == [[4 * 64 * 64, 4 * 64],
                                                                    [4 * 64 * 4, 4 * 4]]
    assert len(p.messages("tensor")) == 4
    assert p.optimizer_s == pytest.approx(mean_span("Optimizer.step#"), rel=1e-9)
    assert p.zero_grad_s == pytest.approx(mean_span("Optimizer.zero_grad#"), rel=1e-9)
    assert p.optimizer_s > 0
    assert p.step_s == pytest.approx(sum(s["dur"] for s in steps) / len(steps) * 1e-6)


def test_profile_module_root_parameters_join_the_last_layer_as_tensors():
    from sgdnet.profiling import profile_module

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.weight = torch.nn.Parameter(torch.ones(8))   # same name as lin.weight

        def forward(self, x):
            return self.lin(x) * self.weight

    p = profile_module(M(), torch.randn(4, 8), repeats=2, warmup=0)
    assert [(t.name, t.nbytes) for t in p.layers[-1].tensors] == [
        ("weight", 4 * 64), ("bias", 4 * 8), ("M.weight", 4 * 8)]
    assert p.grad_bytes == 4 * (64 + 8 + 8)
