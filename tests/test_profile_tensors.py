"""Profile schema 2: per-tensor sizes and update costs, step costs outside the layers, and the
communication messages of each granularity."""

import json
import math

import pytest

from sgdnet import models
from sgdnet.errors import ProfileError
from sgdnet.workload.profile import Layer, Message, ModelProfile, Tensor


def lin(name, n_in, n_out, f=1e-3, b=2e-3, upd=0.0):
    """A Linear layer: weight n_in x n_out and bias n_out, fp32."""
    w, bias = 4.0 * n_in * n_out, 4.0 * n_out
    return Layer(name, f, b, w + bias, tensors=(Tensor("weight", w, upd), Tensor("bias", bias,
                                                                               upd / 4)))


def mlp():
    # the 4-layer MLP of docs/validation.md: 1024-1024-1024-1024-10
    return ModelProfile("mlp", [lin("l0", 1024, 1024), lin("l1", 1024, 1024),
                                lin("l2", 1024, 1024), lin("l3", 1024, 10)], 32,
                        zero_grad_s=1e-4, loss_s=2e-4, optimizer_s=3e-4)


def test_layer_granularity_is_todays_per_layer_list_on_every_builtin():
    for name in models.names():
        p = models.load(name)
        msgs = p.messages()
        assert [m.ready_after for m in msgs] == p.backward_order()
        assert [m.nbytes for m in msgs] == [p.layers[i].grad_bytes for i in p.backward_order()]
        if not p.has_tensors:
            assert p.messages("tensor") == msgs   # no tensor lists: one tensor per layer


def test_tensor_granularity_sends_weight_and_bias_separately():
    p = mlp()
    msgs = p.messages("tensor")
    assert len(msgs) == 8 == 2 * len(p.messages("layer"))     # the 8 all-reduces of the loop
    assert [m.name for m in msgs[:4]] == ["l3.bias", "l3.weight", "l2.bias", "l2.weight"]
    assert [m.ready_after for m in msgs] == [3, 3, 2, 2, 1, 1, 0, 0]
    assert msgs[0].nbytes == 40 and msgs[1].nbytes == 40960
    assert math.fsum(m.nbytes for m in msgs) == p.grad_bytes


def test_bucket_granularity_follows_ddp_rule_over_tensors():
    p = mlp()
    # DDP rule, 1 MiB cap, tensors in reverse order: l3.b (40) l3.w (40960) l2.b (4096)
    # l2.w (4194304) closes bucket 0; l1.b + l1.w closes bucket 1; l0.b + l0.w is the last
    msgs = p.messages("bucket", bucket_bytes=2**20)
    assert [m.nbytes for m in msgs] == [40 + 40960 + 4096 + 4194304, 4096 + 4194304,
                                        4096 + 4194304]
    assert [m.ready_after for m in msgs] == [2, 1, 0]
    assert msgs[0].layers == (3, 2) and msgs[0].tensors[0] == "l3.bias"
    # these equal the byte counts DDP reported for this MLP in docs/validation.md
    assert [m.nbytes for m in msgs] == [4239400, 4198400, 4198400]
    one = p.messages("bucket", bucket_bytes=math.inf)
    assert len(one) == 1 and one[0].nbytes == p.grad_bytes and one[0].ready_after == 0


@pytest.mark.parametrize("thr", [0, 1e5, 2e6, "25MB", math.inf])
@pytest.mark.parametrize("policy", ["ddp", "horovod"])
def test_bucket_messages_equal_buckets_without_tensor_lists(thr, policy):
    p = models.load("resnet18")
    msgs = p.messages("bucket", bucket_bytes=thr, policy=policy)
    assert [list(m.layers) for m in msgs] == p.buckets(thr, policy)
    assert [m.nbytes for m in msgs] == p.bucket_bytes(thr, policy)


def test_update_costs_ride_with_their_messages():
    p = ModelProfile("m", [lin("a", 10, 10, upd=4e-3), lin("b", 10, 10, upd=8e-3)], 1)
    assert p.update_s == pytest.approx(4e-3 + 1e-3 + 8e-3 + 2e-3)
    for g, kw in (("layer", {}), ("tensor", {}), ("bucket", {"bucket_bytes": 500})):
        assert math.fsum(m.update_s for m in p.messages(g, **kw)) == pytest.approx(p.update_s)
    assert p.messages("tensor")[0] == Message("b.bias", 40.0, 1, (1,), ("b.bias",), 2e-3)


@pytest.mark.parametrize("kw, pat", [({"granularity": "node"}, "granularity"),
                                     ({"granularity": "bucket"}, "bucket_bytes"),
                                     ({"granularity": "tensor", "bucket_bytes": 5}, "bucket"),
                                     ({"granularity": "bucket", "bucket_bytes": 5,
                                       "policy": "nccl"}, "policy")])
def test_messages_bad_input(kw, pat):
    with pytest.raises(ProfileError, match=pat):
        mlp().messages(**kw)


def test_step_costs_totals_and_folding():
    p = mlp()
    assert p.overhead_s == pytest.approx(6e-4)
    assert p.step_s == pytest.approx(p.compute_s + 6e-4)
    f = p.with_step_costs_folded()
    assert f.overhead_s == 0 and f.step_s == pytest.approx(p.step_s)
    assert f.layers[0].forward_s == pytest.approx(p.layers[0].forward_s + 1e-4 + 3e-4)
    assert f.layers[-1].forward_s == pytest.approx(p.layers[-1].forward_s + 2e-4)
    assert f.messages("tensor") == p.messages("tensor")
    assert models.load("vgg16").with_step_costs_folded() is models.load("vgg16")


def test_scaled_keeps_tensors_and_scales_step_costs():
    p = ModelProfile("m", [lin("a", 10, 10, upd=4e-3)], 8, zero_grad_s=1e-3, loss_s=2e-3,
                     optimizer_s=3e-3)
    q = p.scaled(batch_size=16, speed=2.0)
    assert q.loss_s == pytest.approx(2e-3)                      # x2 batch, /2 speed
    assert q.zero_grad_s == pytest.approx(5e-4) and q.optimizer_s == pytest.approx(1.5e-3)
    assert q.layers[0].tensors[0].update_s == pytest.approx(2e-3)
    assert q.messages("tensor")[0].nbytes == p.messages("tensor")[0].nbytes
    c = p.coarse()
    assert [t.name for t in c.layers[0].tensors] == ["a.weight", "a.bias"]
    assert c.update_s == pytest.approx(p.update_s) and c.loss_s == p.loss_s


def test_round_trip_v2(tmp_path):
    from sgdnet.workload.ops import Op
    la = Layer("a", 1e-3, 2e-3, 44.0, 0.1, tensors=[("weight", 40.0, 1e-6), ("bias", "4B")],
               ops=[Op("mm", "matmul", 200.0, 20.0, 10.0), {"name": "relu", "kind": "vector",
                                                           "flops": 10, "elems": 20}])
    p = ModelProfile("m", [la, ("b", 1e-3, 1e-3, 8)], 4, precision="bf16", loss_s="1ms",
                     zero_grad_s=2e-5, optimizer_s=0.0)
    f = p.save(tmp_path / "m.json")
    d = json.loads(f.read_text())
    assert d["schema_version"] == 2 and d["precision"] == "bf16"
    assert d["layers"][0]["tensors"][1] == {"name": "bias", "bytes": 4.0}
    assert "tensors" not in d["layers"][1]
    q = ModelProfile.load(f)
    assert q == p and q.layers[0].ops[1].kind == "vector" and q.loss_s == 1e-3
    # a profile without the new detail is still written as schema version 1
    bare = ModelProfile("m", [("a", 1e-3, 1e-3, 8)], 4)
    assert json.loads(bare.to_json())["schema_version"] == 1


GOOD = {"schema_version": 2, "name": "m", "batch_size": 4,
        "layers": [{"name": "a", "forward_s": 1e-3, "backward_s": 2e-3, "grad_bytes": 10,
                    "tensors": [{"name": "weight", "bytes": 6}, {"name": "bias", "bytes": 4}]}]}


@pytest.mark.parametrize("mutate, pat", [
    (lambda d: d["layers"][0]["tensors"][0].update(bytes=7), r"add up to 11.*grad_bytes is 10"),
    (lambda d: d["layers"][0]["tensors"][1].update(name="weight"), "duplicate"),
    (lambda d: d["layers"][0]["tensors"][1].update(bytes=-4), r"tensors\[1\]\.bytes"),
    (lambda d: d["layers"][0]["tensors"][1].update(update_s="soon"), r"tensors\[1\]\.update_s"),
    (lambda d: d["layers"][0]["tensors"][1].update(dtype="f"), r"tensors\[1\]"),
    (lambda d: d["layers"][0].update(tensors=[]), "empty"),
    (lambda d: d["layers"][0].update(ops=[{"name": "x", "kind": "conv", "flops": 1,
                                           "elems": 1}]), "kind 'conv'"),
    (lambda d: d["layers"][0].update(ops=[{"name": "x", "kind": "matmul", "flops": -1,
                                           "elems": 1}]), "flops"),
    (lambda d: d.update(precision="fp8"), "precision"),
    (lambda d: d.update(loss_s=-1), "loss_s"),
    (lambda d: d.update(schema_version=1), r"need 'schema_version': 2"),
    (lambda d: d.update(schema_version=3), "schema_version"),
])
def test_malformed_v2_names_field(tmp_path, mutate, pat):
    d = json.loads(json.dumps(GOOD))
    mutate(d)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(d))
    with pytest.raises(ProfileError, match=pat) as info:
        ModelProfile.load(f)
    assert str(f) in str(info.value)


def test_split_tensors_is_per_tensor_communication_for_per_layer_variants():
    p = mlp()
    q = p.split_tensors()
    assert q.n_layers == 8
    assert [(m.nbytes, m.name) for m in q.messages("layer")] == \
        [(m.nbytes, m.name) for m in p.messages("tensor")]
    assert q.compute_s == pytest.approx(p.compute_s) and q.step_s == pytest.approx(p.step_s)
    assert q.forward_s == pytest.approx(p.forward_s) and q.backward_s == pytest.approx(p.backward_s)
    # layer l3 = [l3.weight (no time), l3.bias (all of l3's time)]
    assert (q.layers[6].compute_s, q.layers[7].compute_s) == (0.0, p.layers[3].compute_s)
    assert models.load("vgg16").split_tensors() is models.load("vgg16")
    g = models.load("vit_l16").split_tensors()
    assert g.grad_bytes == models.load("vit_l16").grad_bytes and g.has_ops


@pytest.mark.parametrize("granularity", ["layer", "tensor"])
def test_per_tensor_allreduce_loop_closed_form(granularity):
    """A loop that all-reduces each message after the backward (2 workers, deterministic):
    a step is compute + sum over messages of the ring cost 2(n-1)a + 2(n-1)/n S/B."""
    import sgdnet
    from sgdnet import Cluster

    p = ModelProfile("mlp", [lin("l0", 1024, 1024, 1e-3, 2e-3), lin("l1", 1024, 1024, 1e-3, 2e-3),
                             lin("l2", 1024, 10, 1e-4, 2e-4)], 32)
    alpha, bw = 500e-6, 1e9
    prof = p.split_tensors() if granularity == "tensor" else p
    pred = sgdnet.predict("allreduce", prof, Cluster(workers=2, bandwidth=bw, latency=alpha),
                          granularity="fine", bucket_bytes=0, overlap=False, steps=50,
                          replications=2, seed=0)
    step = p.compute_s + math.fsum(2 * alpha + m.nbytes / bw for m in p.messages(granularity))
    assert pred.iterations_per_s.mean == pytest.approx(1 / step, rel=1e-9)
