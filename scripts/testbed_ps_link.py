"""The PS host's link during a sync-PS run on the emulated cluster, folded over the step.

Root (iproute2, torch). One warm-up launch, then one ``train`` job (``--scheme``, ``tb-mlp``
unless ``--model``) while a sampler inside the PS host's namespace reads its ``eth0`` byte
counters every ~1 ms. Prints, over the measured steps: the link's utilisation into and out of
the PS host, the spread of the workers' step ends, and the mean utilisation in 5 ms bins of
the step's phase (from worker 1's step ends). ``--json`` keeps the folded profile and the
spreads (not the raw samples).

    python scripts/testbed_ps_link.py --rate 250Mbit/s --workers 4
    python scripts/testbed_ps_link.py --rate 250Mbit/s --workers 4 --model-only \
        --cluster docs/data/testbed37_quiet_cluster-100mbit.yaml \
        --profile-from docs/data/testbed37_long_runs.json

``--model-only``: the same folded profile of the model (no root): the fine sync-PS net of the
one-worker profile (``--profile-from`` a campaign file's ``profiles``) on
``Cluster.from_file(--cluster, workers, bandwidth=rate x the file's sustained / tbf ratio)``,
traced; each transfer through the PS host's links counted at its mean rate (bytes over its
duration) over its interval, in the same 5 ms bins from worker 0's step ends.

The counters move in bursts of softirq work (single samples reach 3x the rate and single
~1 ms samples read 0), so only bins of several ms mean anything.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # testbed_ps_timeline

SAMPLER = """
import json, sys, time
dur, out = float(sys.argv[1]), sys.argv[2]
rx = open('/sys/class/net/eth0/statistics/rx_bytes')
tx = open('/sys/class/net/eth0/statistics/tx_bytes')
end, s = time.perf_counter() + dur, []
while (t := time.perf_counter()) < end:
    rx.seek(0); tx.seek(0)
    s.append((t, int(rx.read()), int(tx.read())))
    time.sleep(0.001)
json.dump(s, open(out, 'w'))
"""


def fold(samples: list, stamps: list[list[float]], warmup: int, rate: float,
         bin_s: float = 5e-3) -> dict:
    """Utilisation, step-end spread and the per-phase profile (see the module docstring)."""
    import numpy as np

    s = np.asarray(samples, dtype=float)
    ends = np.array([x[warmup:warmup + min(len(y) for y in stamps) - warmup] for x in stamps])
    ref = ends[0]
    t, rx, tx = s[:, 0], s[:, 1], s[:, 2]
    win = (t >= ref[0]) & (t <= ref[-1])
    span = t[win][-1] - t[win][0]
    steps = len(ref) - 1
    period = float(np.median(np.diff(ref)))
    edges = np.arange(0.0, period + bin_s, bin_s)
    prx = np.zeros(len(edges) - 1)
    ptx = np.zeros(len(edges) - 1)
    for a in ref[:-1]:
        prx += np.diff(np.interp(a + edges, t, rx)) / bin_s / rate
        ptx += np.diff(np.interp(a + edges, t, tx)) / bin_s / rate
    return {"steps": steps, "period_s": period,
            "step_end_spread_s": float(np.median(ends.max(0) - ends.min(0))),
            "rx_util": float((rx[win][-1] - rx[win][0]) / rate / span),
            "tx_util": float((tx[win][-1] - tx[win][0]) / rate / span),
            "rx_bytes_per_step": float((rx[win][-1] - rx[win][0]) / steps),
            "phase_s": edges[:-1].tolist(), "rx_profile": (prx / steps).tolist(),
            "tx_profile": (ptx / steps).tolist()}


def model_fold(cluster_file: Path, profile_from: Path, model: str, workers: int, rate: float,
               bin_s: float = 5e-3) -> dict:
    """The model's folded PS-link profile (``--model-only``, see the module docstring)."""
    import numpy as np
    from testbed_ps_timeline import traced_sync_ps

    _prof, ev = traced_sync_ps(cluster_file, profile_from, model, workers, rate)
    ends = np.array(sorted(e["end"] for e in ev
                           if e["tags"].get("step") and e["tags"].get("worker") == 0))
    period = float(np.median(np.diff(ends)))
    edges = np.arange(0.0, period + bin_s, bin_s)

    def profile(link: str) -> list[float]:
        tot = np.zeros(len(edges) - 1)
        flows = [e for e in ev if link in e["resources"] and e["end"] > e["start"]]
        for a in ends[:-1]:
            g = a + edges
            for e in flows:
                lo = np.clip(g[:-1], e["start"], e["end"])
                hi = np.clip(g[1:], e["start"], e["end"])
                tot += e["tags"]["bytes"] / (e["end"] - e["start"]) * (hi - lo) / bin_s
        return (tot / (len(ends) - 1) / rate).tolist()

    return {"period_s": period, "phase_s": edges[:-1].tolist(),
            "rx_profile": profile("ps0.down"), "tx_profile": profile("ps0.up")}


def _show_profile(res: dict, out: Path | None) -> int:
    """Print the folded profile (and write ``res`` to ``out``); the exit code 0."""
    print("phase ms: into/out " + " ".join(
        f"{p * 1e3:.0f}:{r:.2f}/{x:.2f}"
        for p, r, x in zip(res["phase_s"], res["rx_profile"], res["tx_profile"])))
    if out:
        out.write_text(json.dumps(res, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="250Mbit/s")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--scheme", default="sync-ps")
    ap.add_argument("--model", default="tb-mlp")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--model-only", action="store_true", help="the model's profile, no run")
    ap.add_argument("--cluster", type=Path, help="--model-only: the calibration file")
    ap.add_argument("--profile-from", type=Path, help="--model-only: a campaign file")
    a = ap.parse_args(argv)
    from sgdnet import units

    if a.model_only:
        if a.cluster is None or a.profile_from is None:
            ap.error("--model-only needs --cluster FILE and --profile-from CAMPAIGN.json")
        rate = units.bandwidth(a.rate, what="rate")
        res = model_fold(a.cluster, a.profile_from, a.model, a.workers, rate)
        print(f"model sync-ps {a.model} n={a.workers} at {rate * 8e-6:g} Mbit/s: period "
              f"{res['period_s'] * 1e3:.1f} ms")
        return _show_profile(res, a.json)
    from sgdnet.testbed.netns import EmulatedCluster
    from sgdnet.testbed.runner import launch, summarize_job

    rate = units.bandwidth(a.rate, what="rate")
    job = {"kind": "train", "id": "run", "scheme": a.scheme, "model": a.model, "batch": 32,
           "warmup": a.warmup}
    with tempfile.TemporaryDirectory() as tmp, EmulatedCluster(a.workers + 1, rate=rate) as cl:
        prog, out = Path(tmp) / "sampler.py", Path(tmp) / "samples.json"
        prog.write_text(SAMPLER)
        launch(cl, a.workers + 1, [{**job, "steps": 5, "warmup": 1}])
        # the sampler outlasts the job; its samples after the last step are dropped
        budget = 10.0 + a.steps * 0.5
        p = subprocess.Popen(cl.exec_args(0, [sys.executable, str(prog), str(budget), str(out)]))
        got = launch(cl, a.workers + 1, [{**job, "steps": a.steps}])
        p.wait()
        row = summarize_job(got["ranks"], 0, a.warmup)
        stamps = [r["jobs"][0]["stamps"] for r in got["ranks"][1:]]
        res = fold(json.loads(out.read_text()), stamps, a.warmup, rate)
    res.update({"rate_Bps": rate, "workers": a.workers, "scheme": a.scheme, "model": a.model,
                "steps_per_s": row["steps_per_s"]})
    print(f"{a.scheme} {a.model} n={a.workers} at {rate * 8e-6:g} Mbit/s: "
          f"{row['steps_per_s']:.2f} steps/s, period {res['period_s'] * 1e3:.1f} ms, "
          f"step ends spread {res['step_end_spread_s'] * 1e3:.1f} ms (median), "
          f"link into / out of the PS host {res['rx_util']:.1%} / {res['tx_util']:.1%} busy")
    return _show_profile(res, a.json)


if __name__ == "__main__":
    raise SystemExit(main())
