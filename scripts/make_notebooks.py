"""Write the worked-example notebooks in ``notebooks/`` from the cells below.

The notebooks are generated (unexecuted) so their source stays reviewable here::

    python scripts/make_notebooks.py          # rewrites notebooks/*.ipynb

``tests/test_notebooks.py`` executes every notebook with nbclient; each is kept to a few seconds
(coarse nets, a few hundred steps, a handful of replications, the in-process study executor).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parents[1] / "notebooks"


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


# ---------------------------------------------------------------------------- (a) quick start
QUICKSTART = [
    md("""
# Quick start: predict a throughput and plot a scaling curve

sgdnet turns an SGD variant, a model profile and a cluster into a stochastic timed Petri net and
plays it forward with a Monte Carlo engine. This notebook predicts the throughput of synchronous
SGD on a parameter server for ResNet-50, then the scaling curve of two variants, then runs the
same comparison as a batch `Study` whose rows land in one tidy table.
"""),
    code("""
import sgdnet
from sgdnet import Cluster, Study, models

resnet = models.load("resnet50")
print(resnet)
print(f"{resnet.n_layers} layers, {resnet.compute_s * 1e3:.0f} ms of compute per step at batch "
      f"{resnet.batch_size}, {resnet.grad_bytes / 1e6:.0f} MB of gradients")
"""),
    md("""
## One prediction

Four workers with 10 Gbit/s NICs and one parameter-server shard. `granularity="coarse"` models a
step as a compute phase followed by a communication phase (the fine-grained net, the default,
has per-layer operations and overlaps backward with gradient pushes). Figures are Estimates:
a mean with a 95% confidence interval across independent replications.
"""),
    code("""
SIM = dict(granularity="coarse", steps=200, warmup=20, replications=4, seed=0)
pred = sgdnet.predict("sync-ps", "resnet50", Cluster(workers=4, bandwidth="10Gbps"), **SIM)
print("steps/s  :", pred.steps_per_s)
print("samples/s:", pred.samples_per_s)
lo, hi = pred.steps_per_s.ci()
assert lo <= pred.steps_per_s.mean <= hi
"""),
    md("""
## A scaling curve

`sgdnet.scaling` predicts each worker count; `sgdnet.viz.plot_scaling` draws samples/s against
workers with the CI band and the ideal linear speed-up (dashed).
"""),
    code("""
from sgdnet import viz

workers = [1, 2, 4, 8, 16]
curves = {v: sgdnet.scaling(v, "resnet50", Cluster(bandwidth="10Gbps"), workers=workers, **SIM)
          for v in ("sync-ps", "allreduce")}
ax = viz.plot_scaling(curves, title="ResNet-50, 10 Gbit/s, coarse nets")
"""),
    md("""
## The same as a batch study

A `Study` expands a grid over any `predict` argument or `cluster.<field>` into rows, each with
its own seed derived from the study seed and the row's parameters (so any executor, and any
resumed run, gives the same rows). Here it runs in this process (`"serial"`); the default
`"local"` executor uses all cores, and `"dask"` a Dask cluster. With `out="table.csv"` the rows
are streamed to disk and an interrupted study resumes where it stopped.
"""),
    code("""
study = Study(grid={"variant": ["sync-ps", "allreduce"], "cluster.workers": workers,
                    "cluster.bandwidth": ["10Gbps", "25Gbps"]},
              fixed={"model": "resnet50", "granularity": "coarse", "steps": 200, "warmup": 20},
              replications=4, seed=0)
result = study.run("serial")
df = result.frame()
df[["variant", "cluster.bandwidth", "cluster.workers", "samples_per_s_mean", "speed_up",
    "efficiency"]].round(3)
"""),
    code("""
# speed-up is against the one-worker row of the same configuration; it cannot beat linear
assert (df["speed_up"] <= df["cluster.workers"] * 1.05).all()
print(df.pivot_table(index="cluster.workers", columns=["variant", "cluster.bandwidth"],
                     values="efficiency").round(2))
"""),
]


# ---------------------------------------------------------------------------- (b) stragglers
STRAGGLERS = [
    md("""
# Stragglers: how BSP, backup workers, SSP and DSSP react to slow steps

A *straggler* here is a per-step slowdown: with probability `p`, a worker's whole step is
`factor` times slower (`Cluster(straggler={"kind": "step", "p": p, "factor": 4})`; see
`sgdnet.workload.stragglers`). Which SGD variant suffers?

* **BSP** (`sync-ps`): every step waits for the slowest of the `n` workers, so with `n = 8` and
  `p = 0.1` more than half the steps (`1 - 0.9^8 = 57%`) contain a slow worker.
* **Backup workers** (`backup`): the server aggregates the first `n - b` gradients and drops the
  rest, so one slow worker per step costs nothing when `b >= 1`.
* **SSP** (`ssp`, staleness `s`): a worker may run up to `s` steps ahead of the slowest, so a
  slow step is absorbed as long as it is made up within `s` steps.
* **DSSP** (`dssp`): like SSP(`s_L`), except that the fastest worker beyond `s_L` is released
  `r* + 1` more times, `r*` in `[0, r_max]` chosen at run time from the fastest's and the
  slowest's recent push intervals (no bound on its lead unless `s_upper` is set).
"""),
    code("""
import numpy as np

import sgdnet
from sgdnet import Study

N = 8
VARIANTS = [
    {"variant": "sync-ps"},
    {"variant": "backup", "backups": 1},
    {"variant": "ssp", "staleness": 2},
    {"variant": "dssp", "s_lower": 1, "r_max": 3},
]
LEVELS = [0.0, 0.05, 0.1, 0.2]
stragglers = [None] + [{"kind": "step", "p": p, "factor": 4} for p in LEVELS[1:]]
study = Study(configs=VARIANTS,
              grid={"cluster.straggler": stragglers},
              fixed={"model": "resnet50", "granularity": "coarse", "cluster.workers": N,
                     "cluster.bandwidth": "25Gbps", "steps": 200, "warmup": 20},
              replications=4, seed=2)
print(study)
result = study.run("serial")
assert not result.failed, result.failed[:1]
df = result.frame()
"""),
    code("""
import json


def level(spec):
    return 0.0 if spec is None or spec != spec else json.loads(spec)["p"]

df["p"] = df["cluster.straggler"].map(level)
base = df[df["p"] == 0].set_index("variant")["steps_per_s_mean"]
df["relative"] = df["steps_per_s_mean"] / df["variant"].map(base)
table = df.pivot_table(index="p", columns="variant", values="relative")
table.round(3)
"""),
    code("""
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3.5))
for v in table.columns:
    ax.plot(table.index, table[v], marker="o", label=v)
ax.set_xlabel("probability that a worker's step is 4x slower")
ax.set_ylabel("throughput / throughput without stragglers")
ax.set_title(f"{N} workers, ResNet-50, 25 Gbit/s")
ax.legend()
ax.grid(alpha=0.3)
"""),
    md("""
BSP loses the most: its step time is the maximum over the workers. For a lockstep step of
compute time `c` (communication aside), the expected step with per-worker slowdown is
`c * (1 + (factor - 1) * P(at least one slow worker))`. The check below compares the BSP
prediction with that bound's shape: the loss grows like `1 - (1 - p)^n`, far above the mean
slowdown `p * (factor - 1)` a single worker suffers.
"""),
    code("""
p = np.array(LEVELS)
any_slow = 1 - (1 - p) ** N
print("P(some worker slow):", any_slow.round(3))
bsp = table["sync-ps"].to_numpy()
# the less tolerant the protocol, the larger the loss at the highest level
assert bsp[-1] < 1.0
assert table.loc[LEVELS[-1]].idxmax() != "sync-ps"
"""),
]


# ---------------------------------------------------------------------------- (c) your own net
CUSTOM = [
    md("""
# Build your own variant as a Petri net, and check it against the exact cycle time

A variant is just a `sgdnet.Net`. Here: `n` workers with different speeds compute a step,
then an all-reduce (one transition, a barrier over all workers) averages the gradients, and
with *staleness 1* (as in Pipe-SGD) the all-reduce of step `k` overlaps the compute of step
`k + 1`. Built without shared resources and with deterministic durations, the net is a *timed
event graph*: its throughput is exactly `1 / λ`, `λ` the maximum over circuits of (total duration
on the circuit) / (tokens on it), which `sgdnet.analysis.cycle_time` computes by max-plus
policy iteration. The Monte Carlo engine must agree to rounding.
"""),
    code("""
import math

import sgdnet
from sgdnet import Deterministic, Exponential, Net, models
from sgdnet.workload.network import ring_allreduce_time

model = models.load("resnet18")
speeds = [1.0, 1.0, 0.8, 0.5]          # worker 3 is twice slower
n = len(speeds)
allreduce_s = ring_allreduce_time(model.grad_bytes, n, 1.25e9, 50e-6)   # 10 Gbit/s ring
compute_s = [model.compute_s / s for s in speeds]
print(f"compute per worker: {[round(c * 1e3, 1) for c in compute_s]} ms; "
      f"all-reduce: {allreduce_s * 1e3:.1f} ms")


def pipelined(staleness=1, dist=Deterministic):
    net = Net(f"pipe-allreduce-s{staleness}")
    ar_idle = net.place("allreduce_idle", tokens=1)     # one all-reduce at a time
    for i, c in enumerate(compute_s):
        idle = net.place(f"w{i}/idle", tokens=1, worker=i)        # one step at a time
        fresh = net.place(f"w{i}/model", tokens=1 + staleness, worker=i)  # models it may use
        grad = net.place(f"w{i}/grad", worker=i)
        net.transition(f"w{i}/compute", dist(c), inputs={idle: 1, fresh: 1},
                       outputs={idle: 1, grad: 1}, tags={"worker": i, "kind": "compute"})
    net.transition("allreduce", dist(allreduce_s),
                   inputs={ar_idle: 1, **{f"w{i}/grad": 1 for i in range(n)}},
                   outputs={ar_idle: 1, **{f"w{i}/model": 1 for i in range(n)}},
                   tags={"kind": "comm", "step": True})
    return net.validate()


net = pipelined()
print(net, "| event graph:", net.is_event_graph())
"""),
    md("""
By hand, the circuits are: each worker's compute self-loop (`c_i`, one token), the all-reduce
self-loop (`a`, one token), and worker `i`'s compute -> all-reduce -> back through its model
place (`c_i + a`, `1 + staleness` tokens). So `λ = max(max_i c_i, a, (max_i c_i + a) / (1 + s))`.
"""),
    code("""
from sgdnet import analysis

s = 1
by_hand = max(max(compute_s), allreduce_s, (max(compute_s) + allreduce_s) / (1 + s))
ct = analysis.cycle_time(net)
print(f"cycle time by hand {by_hand * 1e3:.4f} ms, max-plus {ct.cycle_time * 1e3:.4f} ms;"
      f" critical circuit: {ct.critical_circuit}")
assert math.isclose(ct.cycle_time, by_hand, rel_tol=1e-12)

res = sgdnet.simulate(net, steps=200, warmup=20, replications=1, seed=0)
print("simulated:", res.throughput, "| exact:", 1 / by_hand, "steps/s")
assert math.isclose(res.throughput.mean, 1 / by_hand, rel_tol=1e-9)
"""),
    md("""
Without staleness (`s = 0`) the all-reduce cannot overlap compute and the cycle is the sum; the
slow worker sets the pace either way. Let's compare both against the engine, then make the
durations random: exponential compute and all-reduce times with the same means. The event
graph stays an event graph, but the max-plus value is now only the deterministic reference:
randomness makes barriers wait for the maximum of random times, so throughput drops.
"""),
    code("""
rows = []
for s in (0, 1, 2):
    exact = 1 / analysis.cycle_time(pipelined(s)).cycle_time
    det = sgdnet.simulate(pipelined(s), steps=200, warmup=20, replications=1, seed=0)
    rnd = sgdnet.simulate(pipelined(s, Exponential), steps=300, warmup=30, replications=4,
                          seed=0)
    rows.append((s, exact, det.throughput.mean, rnd.throughput))
    assert math.isclose(det.throughput.mean, exact, rel_tol=1e-9)
    assert rnd.throughput.ci()[0] < exact        # random durations are never faster
for s, exact, det, rnd in rows:
    print(f"staleness {s}: exact {exact:.3f}, simulated {det:.3f}, exponential {rnd}")
# without staleness the barrier waits for a maximum of random times every step
assert rows[0][3].ci()[1] < rows[0][1]
"""),
    md("""
With staleness, the slowest worker's own compute loop (one token, exponential durations of mean
`c_max`) becomes the bottleneck, and a renewal process of mean `c_max` has throughput exactly
`1 / c_max`: the random net approaches the deterministic value as `s` grows.
"""),
    md("""
Registering the builder (`sgdnet.variants.register`) makes it available to `predict`, `Study`
and the `sgdnet` command like the built-in variants; `sgdnet.viz.draw_net(net)` draws it.
"""),
    code("""
from sgdnet import viz

ax = viz.draw_net(pipelined(1))
"""),
]


NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_stragglers.ipynb": STRAGGLERS,
    "03_custom_variant.ipynb": CUSTOM,
}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        for i, cell in enumerate(cells):  # stable ids: regenerating changes only what changed
            cell.id = hashlib.sha256(f"{name}:{i}".encode()).hexdigest()[:8]
        nb = new_notebook(cells=cells, metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        })
        nbformat.validate(nb)
        path = OUT / name
        nbformat.write(nb, path)
        print(f"wrote {path.relative_to(OUT.parent)} ({len(cells)} cells)")


if __name__ == "__main__":
    main()
