#!/usr/bin/env python
"""Rebuild ``models/*.json``: the CNNs/GNMT from the PipeDream per-layer profiles in
``../shared/data``, the transformers (bert_large, gpt2_medium, gpt2_xl, vit_l16) and the CNNs
PipeDream lacks (resnet34, resnet152, vgg19, inception_v4) from their architecture and the
compute model (``sgdnet.workload.transformers.BUILTIN`` and ``sgdnet.workload.cnns.BUILTIN``
state each one's sequence length or image size, batch, device and precision).

Usage::

    python scripts/build_models.py [--data ../shared/data] [--out models] [--check]

Derivation (the same for every model; recorded in each profile's ``source`` and ``meta``):

1. **Parse** ``pipedream_profiles/<model>.graph.txt``: node lines
   ``nodeN -- <module repr> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
   activation_size=<bytes>, parameter_size=<bytes>`` and edge lines ``nodeA -- nodeB``.
2. **Order** the nodes topologically from the edges (Kahn's algorithm, ties broken by the
   smaller node number, which is PipeDream's forward execution order).
3. **Input nodes** (``Input``, ``Input0``...) are data loading, not compute: their time is
   excluded (and written to ``meta.input_forward_ms_excluded``).
4. **Layers** are the nodes with ``parameter_size > 0``, in topological order. Their gradient
   bytes are PipeDream's ``parameter_size``, which is bytes of fp32 weights and biases
   (BatchNorm: gamma and beta only, no running statistics) -- for ResNet-18/50, VGG16 and
   AlexNet it equals 4 x the torchvision parameter totals in ``layer_params.txt`` exactly.
5. **Parameterless nodes** (ReLU, pooling, Add, Concat, dropout, views...) are folded into a
   parameter layer: the *owner* of a parameterless node is its graph predecessor that comes
   last in topological order if that predecessor carries parameters, otherwise that
   predecessor's owner (so a ReLU after a BatchNorm joins the BatchNorm, a residual Add joins
   the last layer of the branch that feeds it last). A parameterless node with no non-input
   predecessor (the first nodes after the input, GNMT's ``hidden`` state) goes to the first
   parameter layer after it in topological order. The forward and backward totals are
   therefore exactly the sums over all non-input nodes.
6. **Batch size**: image models from the input node's activation size, 3 x 224 x 224 fp32
   (602,112 bytes) per sample, 3 x 299 x 299 for inception_v3. GNMT has no image input; its
   batch is inferred from the LSTM state outputs: each ``LSTM(..., 1024)`` node emits
   ``h_n`` and ``c_n`` of shape 1 x B x 1024 fp32 = 131,072 bytes, so B = 32 sentences (the
   encoder activations, 6,291,456 bytes = 32 x 48 tokens x 1024 x 4, give source length 48).
7. Times are converted from milliseconds to seconds; numbers are rounded to 12 significant
   digits.
8. **Ops** (extra data for the compute model; the times stay PipeDream's measured ones):
   every non-input node gets the ops of its module repr (:func:`node_ops`), per sample, and
   a layer carries the ops of the nodes folded into it, in topological order. A node's
   output elements per sample are its ``activation_size`` / 4 / batch (fp32); its input
   elements are its predecessors' outputs. ``Conv2d`` and ``Linear``: matmul FLOPs from the
   repr's channels, kernel and groups and the output spatial size (output elements /
   output channels); ``BatchNorm2d``, ``ReLU``, ``Add``, ``Dropout``, ``Concat``, pooling:
   vector ops (:mod:`sgdnet.workload.ops`); views, ``Size`` and ``__getitem__`` cost
   nothing. GNMT's recurrent modules: LSTM gate GEMMs (``8 h (in + h)`` FLOPs per token and
   direction) and cell updates, additive (Bahdanau) attention over the source positions,
   embedding gathers and the classifier GEMM; sequence lengths from the activation sizes.
   The forward matmul FLOPs so derived match torchvision's published multiply-accumulate
   counts (``tests/test_cnns.py``).
9. **Precision** ``fp32``: PipeDream's profiler (``profiler/image_classification/main.py``)
   trains in fp32 (no ``.half()``, no AMP); gradients are fp32.

The device is not named in the PipeDream files, so profiles say ``device="unspecified GPU
(PipeDream profiling run)"``; :func:`sgdnet.workload.compute.retime` needs ``from_device``
to re-time them for a device or precision.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sgdnet.workload.ops import (  # noqa: E402
    Op,
    batchnorm_op,
    conv2d_op,
    eltwise_op,
    linear_op,
    pool_op,
)
from sgdnet.workload.profile import Layer, ModelProfile  # noqa: E402

MODELS = ["alexnet", "vgg16", "resnet18", "resnet50", "resnet101", "resnext50", "inception_v3",
          "densenet121", "squeezenet1_0", "gnmt"]
IMAGE_SIDE = {"inception_v3": 299}
DEVICE = "unspecified GPU (PipeDream profiling run)"
#: torchvision parameter totals in layer_params.txt, where the model is listed there.
PUBLISHED_PARAMS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "vgg16": 138_357_544,
                    "alexnet": 61_100_840}

_NODE = re.compile(r"^(node\d+) -- (.*) -- (forward_compute_time=.*)$")
_EDGE = re.compile(r"^\s*(node\d+) -- (node\d+)\s*$")


def _r(x: float) -> float:
    return float(f"{x:.12g}")


def parse_graph(path: Path) -> tuple[dict[str, dict], list[tuple[str, str]]]:
    """Nodes (id -> {repr, fwd_ms, bwd_ms, act, params}) and edges of a PipeDream graph.txt."""
    nodes: dict[str, dict] = {}
    edges: list[tuple[str, str]] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        m = _EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2)))
            continue
        m = _NODE.match(line)
        if not m:
            raise ValueError(f"{path}:{lineno}: neither a node nor an edge line: {line[:80]!r}")
        kv = dict(item.split("=", 1) for item in m.group(3).split(", "))
        nodes[m.group(1)] = {
            "repr": m.group(2).strip(),
            "fwd_ms": float(kv["forward_compute_time"]),
            "bwd_ms": float(kv["backward_compute_time"]),
            "act": kv["activation_size"],
            "params": float(kv["parameter_size"]),
        }
    for a, b in edges:
        if a not in nodes or b not in nodes:
            raise ValueError(f"{path}: edge {a} -- {b} names an unknown node")
    return nodes, edges


def topo_order(nodes: dict, edges: list[tuple[str, str]]) -> list[str]:
    """Kahn's algorithm, ties broken by node number."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    indeg = dict.fromkeys(nodes, 0)
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    key = lambda n: int(n[4:])  # noqa: E731
    heap = [(key(n), n) for n, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (key(s), s))
    if len(order) != len(nodes):
        raise ValueError("graph has a cycle")
    return order


def short_name(node: str, rep: str) -> str:
    """``node12:Conv2d(64, 192, k=5x5)``-style layer name from a module repr."""
    typ = rep.split("(", 1)[0].strip()
    inner = rep[len(typ):].strip()
    if not inner.startswith("(") or "(  (" in rep:
        return f"{node}:{typ}"
    args = [a.strip() for a in re.split(r",\s*(?![^()]*\))", inner[1:-1]) if a.strip()]
    pos = [a for a in args if "=" not in a]
    kw = dict(a.split("=", 1) for a in args if "=" in a)
    if "kernel_size" in kw:
        pos.append("k=" + "x".join(re.findall(r"\d+", kw["kernel_size"])))
    if "groups" in kw:
        pos.append("g=" + kw["groups"])
    return f"{node}:{typ}({', '.join(pos)})"


def batch_size(model: str, nodes: dict) -> tuple[int, str]:
    """Batch size and a sentence saying how it was inferred."""
    if model == "gnmt":
        sizes = []
        for n in nodes.values():
            if n["repr"].startswith("LSTM(") and n["act"].startswith("["):
                parts = [float(x) for x in n["act"].strip("[]").split(";")]
                sizes.append(parts[1])
        b = {s / (1024 * 4) for s in sizes}
        if len(b) != 1:
            raise ValueError(f"gnmt: inconsistent LSTM state sizes {sorted(set(sizes))}")
        bs = b.pop()
        if not bs.is_integer():
            raise ValueError(f"gnmt: LSTM state size {sizes[0]} is not B x 1024 x 4 bytes")
        return int(bs), (f"batch {int(bs)} sentences inferred from the LSTM h_n/c_n outputs "
                         f"(1 x B x 1024 fp32 = {sizes[0]:.0f} bytes)")
    side = IMAGE_SIDE.get(model, 224)
    per = 3 * side * side * 4
    acts = [float(n["act"]) for n in nodes.values() if n["repr"] == "Input"]
    if len(acts) != 1:
        raise ValueError(f"{model}: expected one Input node, found {len(acts)}")
    bs = acts[0] / per
    if not bs.is_integer():
        raise ValueError(f"{model}: input activation {acts[0]} is not a multiple of {per}")
    return int(bs), (f"batch {int(bs)} inferred from the input activation size "
                     f"{acts[0]:.0f} bytes = {int(bs)} x 3x{side}x{side} fp32")


def _elems(act: str) -> list[float]:
    """Elements (fp32) of a node's activation_size: one number or ``[a; b; ...]``."""
    parts = act.strip("[]").split(";")
    return [float(x) / 4 for x in parts]


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def _kw(rep: str, key: str, default: str | None = None) -> str | None:
    m = re.search(key + r"=(\([^)]*\)|[^,)]+)", rep)
    return m.group(1) if m else default


def _lstm_ops(tag: str, n_in: int, h: int, tokens: float, dirs: int = 1) -> list[Op]:
    """Ops of an LSTM over ``tokens`` steps per sample: per direction the input and
    recurrent gate GEMMs (4 gates) and the cell's elementwise update."""
    out = []
    for d in range(dirs):
        sfx = f"{tag}{'_rev' if d else ''}"
        out.append(Op(f"{sfx}_gates", "matmul", 2.0 * tokens * 4 * h * (n_in + h),
                      tokens * (n_in + h + 4 * h), 4 * h * (n_in + h) + 8 * h))
        out.append(Op(f"{sfx}_cell", "vector", 10.0 * tokens * h, tokens * (4 * h + 3 * h)))
    return out


def node_ops(rep: str, out: list[float], inp: float, batch: int) -> list[Op]:
    """Forward ops per sample of one PipeDream node (see step 8 of the module docstring).

    ``out`` are the node's output elements (all samples; several for multi-output nodes),
    ``inp`` its input elements (all samples).
    """
    o, i = out[0] / batch, inp / batch
    typ = rep.split("(", 1)[0].strip()
    if typ == "Conv2d":
        c_in, c_out = _ints(rep.split("(", 1)[1].split("kernel_size", 1)[0])[:2]
        kh, kw = _ints(_kw(rep, "kernel_size"))[:2]
        groups = int(_kw(rep, "groups", "1"))
        hw = o / c_out
        if not hw.is_integer():
            raise ValueError(f"{rep}: output {o} elements is not a multiple of {c_out} channels")
        return [conv2d_op(c_in, c_out, kh, kw, hw, i, groups=groups,
                          bias="bias=False" not in rep)]
    if typ == "Linear":
        n_in, n_out = int(_kw(rep, "in_features")), int(_kw(rep, "out_features"))
        return [linear_op(n_in, n_out, bias="bias=True" in rep, tokens=o / n_out)]
    if typ.startswith("BatchNorm"):
        return [batchnorm_op(o, _ints(rep.split("(", 1)[1])[0])]
    if typ == "ReLU":
        return [eltwise_op("relu", i, o)]
    if typ == "Add":
        return [eltwise_op("add", i, o)]
    if typ == "Dropout":
        return [eltwise_op("dropout", i, o)]
    if typ == "Concat":
        return [eltwise_op("concat", i, o, 0.0)]
    if typ in ("MaxPool2d", "AvgPool2d"):
        k = _ints(_kw(rep, "kernel_size"))
        return [pool_op(typ.lower()[:7], i, o, k[0] * (k[1] if len(k) > 1 else k[0]))]
    if typ.startswith("AdaptiveAvgPool"):
        return [pool_op("avgpool", i, o, round(i / o))]
    if typ in ("View", "Size", "__getitem__", "hidden") or typ.startswith("Input"):
        return []
    if typ == "Embedding":
        n, d = _ints(rep.split("(", 1)[1])[:2]
        return [Op("gather", "vector", 0.0, 2.0 * o, n * d / 2)]
    if typ == "LSTM":
        n_in, h = _ints(rep.split("(", 1)[1])[:2]
        return _lstm_ops("lstm", n_in, h, o / h)
    if typ == "EmuBidirLSTM":  # parameters and output: the bidirectional LSTM only
        n_in, h = _ints(rep.split("(bidir): LSTM(", 1)[1])[:2]
        return _lstm_ops("bidir_lstm", n_in, h, o / (2 * h), dirs=2)
    if typ == "RecurrentAttention":  # LSTM, then additive attention over the source
        n_in, h = _ints(rep.split("(rnn): LSTM(", 1)[1])[:2]
        t = o / h  # target steps per sample
        src = out[4] / batch / t  # attention scores: target x source per sample
        return (_lstm_ops("rnn", n_in, h, t)
                + [linear_op(h, h, bias=False, tokens=t, name="linear_q"),
                   linear_op(h, h, bias=False, tokens=src, name="linear_k"),
                   Op("additive_scores", "vector", 3.0 * t * src * h, t * h + src * h + t * src),
                   Op("softmax", "vector", 5.0 * t * src, 2.0 * t * src),
                   Op("context", "matmul", 2.0 * t * src * h, t * src + src * h + t * h)])
    if typ == "Classifier":
        inner = rep.split("(classifier): ", 1)[1]
        n_in, n_out = int(_kw(inner, "in_features")), int(_kw(inner, "out_features"))
        return [linear_op(n_in, n_out, bias="bias=True" in inner, tokens=o / n_out)]
    raise ValueError(f"no op rule for module {typ!r} ({rep[:60]!r}); add one to node_ops")


def build(model: str, data: Path) -> ModelProfile:
    """Derive the ModelProfile of ``model`` from ``data/pipedream_profiles``."""
    path = data / "pipedream_profiles" / f"{model}.graph.txt"
    nodes, edges = parse_graph(path)
    order = topo_order(nodes, edges)
    pos = {n: i for i, n in enumerate(order)}
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        preds[b].append(a)
    is_input = {n: nodes[n]["repr"].startswith("Input") for n in nodes}
    params = [n for n in order if nodes[n]["params"] > 0 and not is_input[n]]
    if not params:
        raise ValueError(f"{model}: no parameter-carrying node")
    owner: dict[str, str] = {}
    pending: list[str] = []  # parameterless nodes with no owner yet
    for n in order:
        if is_input[n]:
            continue
        if nodes[n]["params"] > 0:
            owner[n] = n
            for p in pending:
                owner[p] = n
            pending = []
            continue
        ps = [p for p in preds[n] if not is_input[p]]
        if ps:
            last = max(ps, key=pos.__getitem__)
            if last in owner:
                owner[n] = owner[last]
                continue
        pending.append(n)
    if pending:  # trailing nodes with no parameter layer after them and no owned predecessor
        for p in pending:
            owner[p] = params[-1]
    fwd = dict.fromkeys(params, 0.0)
    bwd = dict.fromkeys(params, 0.0)
    for n, o in owner.items():
        fwd[o] += nodes[n]["fwd_ms"]
        bwd[o] += nodes[n]["bwd_ms"]
    bs, how = batch_size(model, nodes)
    ops: dict[str, list[Op]] = {n: [] for n in params}
    for n in order:  # forward order within a layer
        if n in owner:
            inp = sum(sum(_elems(nodes[p]["act"])) for p in preds[n])
            ops[owner[n]].extend(node_ops(nodes[n]["repr"], _elems(nodes[n]["act"]), inp, bs))
    layers = [Layer(short_name(n, nodes[n]["repr"]), _r(fwd[n] / 1e3), _r(bwd[n] / 1e3),
                    nodes[n]["params"], ops=tuple(Op.from_obj(_rounded(o.to_dict()), model)
                                                  for o in ops[n]))
              for n in params]
    input_ms = sum(nodes[n]["fwd_ms"] for n in nodes if is_input[n])
    total_params = sum(nodes[n]["params"] for n in params) / 4
    check = ""
    if model in PUBLISHED_PARAMS:
        pub = PUBLISHED_PARAMS[model]
        rel = abs(total_params - pub) / pub
        if rel > 0.01:
            raise ValueError(f"{model}: {total_params:.0f} params vs published {pub} ({rel:.2%})")
        check = (f"; gradient bytes = {total_params:,.0f} fp32 parameters, matching the "
                 f"torchvision total {pub:,} in layer_params.txt")
    src_file = f"profiler/*/profiles/{model}/graph.txt"
    source = (
        f"PipeDream per-layer profile (msr-fiddle/pipedream {src_file}, MIT licence; "
        f"../shared/data/pipedream_profiles/{model}.graph.txt). {len(params)} parameter-carrying "
        f"nodes of {len(nodes)} kept as layers; parameterless nodes' forward/backward time folded "
        "into their nearest parameter-carrying predecessor (nodes before the first parameter "
        "layer into it); Input node(s) = data loading, excluded "
        f"({input_ms:g} ms forward); {how}; parameter_size taken as gradient bytes (fp32 "
        f"weights+biases, BatchNorm gamma/beta without running stats){check}. Times converted "
        "from ms to s; per-layer ops (FLOPs and elements per sample) derived from the nodes' "
        "module reprs and activation sizes for the compute model; precision fp32 (PipeDream's "
        "profiler trains in fp32); built by scripts/build_models.py."
    )
    meta = {
        "builder": "scripts/build_models.py",
        "data_file": f"pipedream_profiles/{model}.graph.txt",
        "nodes": len(nodes),
        "parameter_nodes": len(params),
        "input_forward_ms_excluded": _r(input_ms),
        "parameters": int(total_params),
        "forward_matmul_flops_per_sample": _r(sum(o.flops for la in layers for o in la.ops
                                                  if o.kind == "matmul")),
    }
    return ModelProfile(model, layers, bs, DEVICE, source, None, meta, precision="fp32")


def build_transformer(model: str) -> ModelProfile:
    """A built-in profile built from its architecture by the compute model
    (sgdnet.workload.transformers, or sgdnet.workload.cnns for the CNNs in ``ARCH_CNNS``)."""
    from sgdnet.workload.cnns import BUILTIN as CNN_BUILTIN
    from sgdnet.workload.transformers import BUILTIN

    fn, kw = (CNN_BUILTIN if model in CNN_BUILTIN else BUILTIN)[model]
    prof = fn(**kw)
    d = prof.to_dict()
    d["source"] += (f"; built-in configuration {kw}, built by scripts/build_models.py")
    return ModelProfile.from_dict(_rounded(d))


def _rounded(obj):
    """Numbers rounded to 12 significant digits (stable, diff-friendly files)."""
    if isinstance(obj, float):
        return _r(obj)
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


TRANSFORMERS = ["bert_large", "gpt2_medium", "gpt2_xl", "vit_l16"]
#: CNNs the PipeDream library lacks, built from their architecture (sgdnet.workload.cnns).
ARCH_CNNS = ["resnet34", "resnet152", "vgg19", "inception_v4"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=next(
        (d for d in (q / "shared" / "data" for q in REPO.parents) if d.is_dir()),
        REPO.parent / "shared" / "data"))
    ap.add_argument("--out", type=Path, default=REPO / "models")
    ap.add_argument("--check", action="store_true",
                    help="do not write; fail if the files on disk differ from a rebuild")
    ap.add_argument("models", nargs="*", default=MODELS + TRANSFORMERS + ARCH_CNNS)
    a = ap.parse_args(argv)
    stale = []
    for model in a.models:
        prof = (build_transformer(model) if model in TRANSFORMERS + ARCH_CNNS
                else build(model, a.data))
        target = a.out / f"{model}.json"
        text = prof.to_json()
        if a.check:
            if not target.exists() or target.read_text() != text:
                stale.append(model)
            continue
        target.write_text(text)
        print(f"{model:14s} {prof.n_layers:4d} layers  batch {prof.batch_size:4d}  "
              f"fwd {prof.forward_s * 1e3:8.2f} ms  bwd {prof.backward_s * 1e3:8.2f} ms  "
              f"grads {prof.grad_bytes / 1e6:8.2f} MB")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
