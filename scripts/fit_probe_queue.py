"""Calibrate the PS links' queue (``Cluster.tcp_queue``) from the PS-traffic probe (issue #37).

For every rate and worker count k >= 2 of ``--from F`` (``validate_testbed37.py --probe-ps``'s
output), the ``tcp_queue`` (seconds) with which sgdnet's prediction of the probe's *sync*
pattern (:func:`predict_probe_ps.probe_profile`, the cluster file's links, no CPU costs, no
update cost) equals the probe's measured steps/s, by bisection on [0, ``--max``]; 0 when the
model without a queue is already as slow. The async cells are not used: they, and the
training campaigns, are what the fitted queue is checked on. Writes a file in
``--probe-queue``'s format (``standing_queue_s``: ``"rate/k": [q]``), for ``--queue``.

    PYTHONPATH=. python scripts/fit_probe_queue.py --from docs/data/testbed37_probe_ps.json \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml --out Q.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", type=Path, required=True)
    ap.add_argument("--cluster", type=Path, required=True)
    ap.add_argument("--model", choices=("static", "join"), default="static")
    ap.add_argument("--max", type=float, default=0.06, help="seconds")
    ap.add_argument("--iters", type=int, default=9)
    ap.add_argument("--sim-steps", type=int, default=200)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)

    from predict_probe_ps import probe_profile

    import sgdnet
    from sgdnet import Cluster
    from sgdnet.workload.cluster_file import load_cluster_file

    d = json.loads(a.src.read_text())
    prof = probe_profile(d["layers_B"], d["compute_s"])
    cf = load_cluster_file(a.cluster)
    ratio = cf.link.bandwidth / float(cf.measurements["tbf_rate_Bps"])

    def pred(rate: float, n: int, q: float) -> float:
        cl = Cluster.from_file(a.cluster, workers=n, bandwidth=rate * ratio,
                               update_s_per_byte=0.0, update_s_per_layer=0.0,
                               send_s_per_byte=0.0, recv_s_per_byte=0.0, reduce_s_per_byte=0.0,
                               tcp_queue=q, tcp_queue_model=a.model)
        p = sgdnet.predict("sync-ps", prof, cl, steps=a.sim_steps, warmup=20, replications=2,
                           seed=0)
        return float(p.steps_per_s.mean)

    fit: dict[str, list[float]] = {}
    for key, runs in sorted(d["runs"].items()):
        rate, mode, n = key.split("/")
        if mode != "sync" or int(n) < 2:
            continue
        meas = statistics.median(r["steps_per_s"] for r in runs)
        lo, hi = 0.0, a.max
        if pred(float(rate), int(n), 0.0) <= meas:
            q = 0.0
        else:
            for _ in range(a.iters):
                mid = (lo + hi) / 2
                if pred(float(rate), int(n), mid) > meas:
                    lo = mid
                else:
                    hi = mid
            q = (lo + hi) / 2
        fit[f"{rate}/{n}"] = [q]
        print(f"{float(rate) * 8e-6:.0f} Mbit/s, {n} workers: measured {meas:.2f} steps/s -> "
              f"tcp_queue {q * 1e3:.2f} ms", flush=True)
    a.out.write_text(json.dumps({"fitted_to": f"{a.src} (sync cells)", "model": a.model,
                                 "cluster": str(a.cluster), "standing_queue_s": fit},
                                indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
