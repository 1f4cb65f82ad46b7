"""CPU nanoseconds per completion of the generic engine and of ``engine="auto"`` (the FIFO fast
path) on the speed anchors' sync-PS model, N = 4, 16, 64: one JSON line, for A/B runs of two
checkouts in alternating processes (the anchors' folder copied to /tmp/anchors, see
"Speed anchors" in bench/README.md)::

    for i in 1 2 3 4; do
      (cd OLD && PYTHONPATH=OLD:OLD/bench python /path/to/bench/anchor_ns.py)
      PYTHONPATH=.:bench python bench/anchor_ns.py
    done

Each figure: ``simulate(parallel=False, replications=1, samples=False)`` of ~1e6 completions
after a warm-up run, CPU time, the median of 3 seeds.
"""

import json
import sys
import time

sys.path.insert(0, "/tmp/anchors")
import anchor_runner as ar  # noqa: E402
from model import Params, build_ps_net  # noqa: E402

import sgdnet as sg  # noqa: E402

out = {}
for N in (4, 16, 64):
    net = ar.to_sgdnet(build_ps_net(Params(N=N)))
    for e in ("generic", "auto"):
        sg.simulate(net, steps=10 * N, warmup=0, replications=1, seed=0, parallel=False, engine=e)
        steps = {4: 60000, 16: 15000, 64: 3000}[N]
        ns = []
        for rep in range(3):
            t = time.process_time()
            r = sg.simulate(net, steps=steps, warmup=0, replications=1, seed=rep + 1,
                            parallel=False, samples=False, engine=e)
            ns.append((time.process_time() - t) / r.events[0] * 1e9)
        out[f"{e}{N}"] = round(sorted(ns)[1], 1)
print(json.dumps(out))
