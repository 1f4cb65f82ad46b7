"""The network model against a PS's traffic without its processes (issue #37).

``validate_testbed37.py --probe-ps --out F`` measures :func:`sgdnet.testbed.tcp_probe.probe_ps`
on the emulated cluster: ``n`` hosts push tb-mlp's four layers' gradient bytes into a PS host
and take the same bytes back per layer (sync: once every worker's layer is in), then sleep 2 ms,
over and over; no torch, no gloo, no model. This script predicts every cell with sgdnet: a
four-layer profile of those bytes whose only compute is the 2 ms before the first layer, on
``Cluster.from_file(FILE, workers=n, bandwidth=rate x the file's sustained / tbf ratio)`` with
the PS's update cost 0 (the sink applies nothing) and, unless ``--cpu file``, no per-byte CPU
costs (the probe's Python socket calls copy in the kernel only); ``--queue Q --queue-model
join|static`` adds ``Cluster.tcp_queue`` from the TCP probe's standing queue at the cell's rate
with k = n; ``--ack F`` adds ``Cluster.tcp_ack_share`` at the cell's rate from the reverse-queue
probe's records (``scripts/probe_reverse_queue.py --out F``: the 525 kB messages into a host
streaming out, :func:`sgdnet.testbed.tcp_reverse.ack_share`). Prints measured vs predicted and
the mean / max |error|.

    PYTHONPATH=. python scripts/predict_probe_ps.py --from docs/data/testbed37_probe_ps.json \\
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from sgdnet.testbed.ps_efficiency import probe_profile  # noqa: E402  (after sys.path)

__all__ = ["probe_profile", "main"]  # probe_profile: other scripts import it from here


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", type=Path, required=True)
    ap.add_argument("--cluster", type=Path, required=True)
    ap.add_argument("--cpu", choices=("zero", "file"), default="zero")
    ap.add_argument("--queue", type=Path)
    ap.add_argument("--queue-model", choices=("join", "static"), default="join")
    ap.add_argument("--ack", type=Path)
    ap.add_argument("--sim-steps", type=int, default=300)
    ap.add_argument("--replications", type=int, default=4)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    from sgdnet.testbed.ps_efficiency import predict_cell
    from sgdnet.testbed.tcp_reverse import ack_shares
    from sgdnet.workload.cluster_file import load_cluster_file

    d = json.loads(a.src.read_text())
    prof = probe_profile(d["layers_B"], d["compute_s"])
    cf = load_cluster_file(a.cluster)
    queues = json.loads(a.queue.read_text())["standing_queue_s"] if a.queue else {}
    acks = ack_shares(json.loads(a.ack.read_text())) if a.ack else {}
    for m, v in sorted(acks.items()):
        print(f"tcp_ack_share at {m:.0f} Mbit/s: {', '.join(f'{x:.3f}' for x in v)}")
    rows = []
    for key, runs in sorted(d["runs"].items(), key=lambda kv: (int(kv[0].split("/")[0]),
                                                                kv[0].split("/")[1],
                                                                int(kv[0].split("/")[2]))):
        rate, mode, n = key.split("/")
        rate_Bps, n = float(rate), int(n)
        kw = {}
        if queues and n >= 2:
            kw.update(tcp_queue=statistics.median(queues[f"{rate}/{n}"]),
                      tcp_queue_model=a.queue_model)
        if acks:
            kw.update(tcp_ack_share=acks[round(rate_Bps * 8e-6)])
        pred = predict_cell(cf, prof, mode, n, rate_Bps, sim_steps=a.sim_steps,
                            replications=a.replications, cpu=a.cpu == "file", **kw)
        meas = statistics.median(r["steps_per_s"] for r in runs)
        rows.append({"rate_Bps": rate_Bps, "mode": mode, "workers": n, "measured": meas,
                     "predicted": pred, "err": pred / meas - 1})
        print(f"| {rate_Bps * 8e-6:.0f} | {mode} | {n} | {meas:.2f} | {pred:.2f} | "
              f"{pred / meas - 1:+.1%} |", flush=True)
    e = [abs(r["err"]) for r in rows if r["workers"] >= 2]
    print(f"cells with 2+ workers: mean |err| {statistics.mean(e):.1%}, max {max(e):.1%} "
          f"over {len(e)}")
    if a.json:
        a.json.write_text(json.dumps({"source": str(a.src), "cluster": str(a.cluster),
                                      "cpu": a.cpu, "queue": str(a.queue) if a.queue else None,
                                      "queue_model": a.queue_model,
                                      "ack": str(a.ack) if a.ack else None,
                                      "ack_share": {str(m): v for m, v in acks.items()},
                                      "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
