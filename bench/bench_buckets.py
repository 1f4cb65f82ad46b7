"""Per-completion CPU cost of the generic kernel on a fine ResNet-50 net (10 Gbps, compute CV
0.1), optionally with a token bucket of BURST bytes on every NIC link: ``python
bench/bench_buckets.py VARIANT WORKERS [BURST]`` (minimum of 3 runs of 400 steps, CPU time).
"""
import sys
import time

import sgdnet
from sgdnet import Cluster, variants
from sgdnet.models import load as get_model

name, n = sys.argv[1], int(sys.argv[2])
prof = get_model("resnet50")
c = Cluster(workers=n, bandwidth="10Gbps", compute_cv=0.1, burst=float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
net = variants.build(name, prof, c)
sgdnet.simulate(net, steps=5, warmup=1, replications=1, seed=0, engine="generic")
best = 1e9
for _ in range(3):
    t = time.process_time()
    r = sgdnet.simulate(net, steps=400, warmup=10, replications=1, seed=1, engine="generic", parallel=False)
    dt = time.process_time() - t
    ev = r._raws[0].events
    best = min(best, dt / ev * 1e9)
print(f"{name} N={n} {best:.1f} ns/completion events {ev}")
