"""``sgdnet testbed`` and ``sgdnet calibrate``: parsers and commands (wired in by sgdnet.cli).

::

    sgdnet testbed --workers 1,2,3,4 --rates 100Mbit/s,200Mbit/s --repeats 3 --out runs.json
    sgdnet testbed --smoke                                   # 2 hosts, a few steps, < 1 minute
    sgdnet calibrate --workers 4 --rate 100Mbit/s --out cluster-100.yaml --profile-out p.json
    sgdnet calibrate --write-spec spec.json --master 10.0.0.1 --world 5 --records-dir /shared/cal
    sgdnet calibrate --from-records /shared/cal --out cluster.yaml     # any gloo cluster
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import TestbedError

__all__ = ["add_parsers", "cmd_testbed", "cmd_calibrate"]


def _ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of integers, e.g. 1,2,4"
                                         ) from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give integers >= 1, e.g. 1,2,4")
    return out


def _strs(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError("give at least one value")
    return out


def _pos_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} must be >= 1")
    return n


def add_parsers(sub: Any) -> None:
    """Add the ``testbed`` and ``calibrate`` sub-commands to ``sub`` (argparse subparsers)."""
    from .runner import SCHEMES

    p = sub.add_parser(
        "testbed", help="train for real on an emulated cluster (Linux, root, torch)",
        description="Build an emulated cluster (a network namespace per host behind a Linux "
                    "bridge, each link shaped both ways with tc tbf), train a small model with "
                    "torch.distributed (gloo) under sync PS, async PS, ring all-reduce per "
                    "layer and DDP, for each worker count, link rate and repeat (interleaved), "
                    "and write per-worker step rates, with the quiet gate's verdict, as JSON. "
                    "Rank 0 is a dedicated parameter-server host.")
    p.add_argument("--out", type=Path, help="results JSON (default: print a summary only)")
    p.add_argument("--smoke", action="store_true",
                   help="2 hosts (PS + 1 worker), 4 steps of each scheme on tb-tiny, 1 repeat")
    p.add_argument("--model", default="tb-mlp", help="testbed model: tb-mlp (default), tb-tiny")
    p.add_argument("--batch", type=_pos_int, default=32, help="samples per step (default 32)")
    p.add_argument("--workers", type=_ints, default=[1, 2, 3, 4],
                   help="worker counts (default 1,2,3,4; plus one PS host)")
    p.add_argument("--rates", type=_strs, default=["100Mbit/s", "200Mbit/s"],
                   help="link rates, each direction (default 100Mbit/s,200Mbit/s)")
    p.add_argument("--schemes", type=_strs, default=list(SCHEMES),
                   help=f"some of {','.join(SCHEMES)} (default all)")
    p.add_argument("--repeats", type=_pos_int, default=3, help="repeats, interleaved (default 3)")
    p.add_argument("--steps", type=_pos_int, default=12, help="measured steps (default 12)")
    p.add_argument("--warmup", type=_pos_int, default=3, help="warm-up steps (default 3)")
    p.add_argument("--bucket-cap-mb", type=float, default=0.5,
                   help="DDP bucket_cap_mb (default 0.5)")
    p.add_argument("--burst", default="64KB", help="token-bucket depth (default 64KB)")
    p.add_argument("--delay", default="0", help="one-way netem delay (needs netem; default 0)")
    p.add_argument("--quiet-threshold", type=float, default=None, metavar="CORES",
                   help="flag a run noisy when other processes used more cores (default 0.5)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per launch before it is stopped (default 300)")
    p.set_defaults(func=cmd_testbed)

    p = sub.add_parser(
        "calibrate", help="measure a cluster's links and costs into a cluster file",
        description="Run the calibration micro-benchmarks (point-to-point size sweep and "
                    "streams, k-to-1 and 1-to-k concurrent sends, CPU cost per byte of send, "
                    "receive and reduce, PS update cost per tensor and per byte, the local SGD "
                    "step, the single-worker profile) on the emulated cluster, or on any gloo "
                    "cluster via --write-spec / --from-records, and write a cluster file that "
                    "Cluster.from_file() and --cluster read.")
    p.add_argument("--out", type=Path, help="cluster file to write (.yaml)")
    p.add_argument("--profile-out", type=Path, help="also write the single-worker profile (.json)")
    p.add_argument("--records-out", type=Path, help="also write every host's raw records (.json)")
    p.add_argument("--workers", type=_pos_int, default=4,
                   help="worker hosts (plus one PS host) of the emulated cluster (default 4)")
    p.add_argument("--rate", default="100Mbit/s", help="emulated link rate (default 100Mbit/s)")
    p.add_argument("--burst", default="64KB", help="emulated token-bucket depth (default 64KB)")
    p.add_argument("--delay", default="0", help="emulated one-way delay (needs netem)")
    p.add_argument("--model", default="tb-mlp", help="testbed model (default tb-mlp)")
    p.add_argument("--batch", type=_pos_int, default=32, help="samples per step (default 32)")
    p.add_argument("--comm-uses-compute", choices=("auto", "true", "false"), default="auto",
                   help="what to write into the file: 'auto' (default) decides from the "
                        "measured CPU cost per byte x bandwidth (>= 50%%: true)")
    p.add_argument("--nccl-gpu", action="store_true",
                   help="NCCL on GPUs: same as --comm-uses-compute false")
    p.add_argument("--update", type=Path, metavar="FILE",
                   help="an existing cluster file: run only the concurrent-flow jobs (k-to-1, "
                        "1-to-k) and write their sharing figures (link.share_cv) into it, "
                        "everything else kept (to --out if given)")
    g = p.add_argument_group("a real cluster (no emulation)")
    g.add_argument("--write-spec", type=Path, metavar="SPEC",
                   help="write the job spec to run 'python -m sgdnet.testbed.worker SPEC RANK' "
                        "on every host (rank 0 = the PS host), then stop")
    g.add_argument("--master", help="rank 0's address (with --write-spec)")
    g.add_argument("--world", type=_pos_int, help="number of hosts (with --write-spec)")
    g.add_argument("--ifname", default="", help="GLOO_SOCKET_IFNAME on the hosts (optional)")
    g.add_argument("--records-dir", default=".", help="where the hosts write rank*.json")
    g.add_argument("--from-records", type=Path, metavar="DIR",
                   help="build the cluster file from the rank*.json files in DIR")
    p.set_defaults(func=cmd_calibrate)


def cmd_testbed(args: argparse.Namespace) -> int:
    """``sgdnet testbed``: a campaign (or ``--smoke``), summary printed, JSON written."""
    from .quiet import DEFAULT_THRESHOLD_CORES
    from .runner import run_campaign, summarize_runs

    kw: dict[str, Any] = dict(model=args.model, batch=args.batch, workers=args.workers,
                              rates=args.rates, schemes=args.schemes, repeats=args.repeats,
                              steps=args.steps, warmup=args.warmup,
                              bucket_cap_mb=args.bucket_cap_mb, burst=args.burst,
                              delay=args.delay, timeout_s=args.timeout,
                              threshold_cores=(DEFAULT_THRESHOLD_CORES
                                               if args.quiet_threshold is None
                                               else args.quiet_threshold))
    if args.smoke:
        kw.update(model="tb-tiny", workers=[1], rates=[args.rates[0]], repeats=1, steps=4,
                  warmup=1, timeout_s=min(args.timeout, 120.0))
    res = run_campaign(**kw, log=lambda s: print(s, flush=True))
    print(f"\n{len(res['runs'])} runs in {res['meta']['elapsed_s']:.0f} s "
          f"(netem {'available' if res['meta']['netem'] else 'not available'})")
    print("scheme    workers  Mbit/s  steps/s median (min-max)  noisy")
    for r in summarize_runs(res["runs"]):
        print(f"{r['scheme']:9s} {r['workers']:7d} {r['rate_Bps'] * 8 / 1e6:7.0f}  "
              f"{r['median']:8.2f} ({r['min']:.2f}-{r['max']:.2f})  {r['noisy']}/{r['n']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1))
        print(f"results -> {args.out}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``sgdnet calibrate``: on the emulated cluster, or spec/records for a real one."""
    from .calibrate import build_cluster_file, calibrate_testbed, calibration_jobs

    cuc = {"auto": None, "true": True, "false": False}[args.comm_uses_compute]
    if args.nccl_gpu:
        cuc = False
    if args.write_spec is not None:
        if not args.master or not args.world:
            raise TestbedError("--write-spec needs --master ADDR and --world N (hosts, rank 0 "
                               "= the PS host)")
        spec = {"world": args.world, "master": args.master, "port": 29500,
                "ifname": args.ifname, "threads": 1, "timeout_s": 600,
                "jobs": calibration_jobs(args.world, model=args.model, batch=args.batch),
                "out_dir": args.records_dir}
        args.write_spec.write_text(json.dumps(spec, indent=1))
        print(f"spec -> {args.write_spec}; on host r run: python -m sgdnet.testbed.worker "
              f"{args.write_spec.name} r   (then: sgdnet calibrate --from-records "
              f"{args.records_dir} --out cluster.yaml)")
        return 0
    if args.out is None and args.update is None:
        raise TestbedError("give --out cluster.yaml (or --update FILE, or --write-spec SPEC)")
    if args.update is not None and args.from_records is not None:
        from ..workload.cluster_file import load_cluster_file
        from .calibrate import with_sharing

        ranks = [json.loads(f.read_text()) for f in sorted(args.from_records.glob("rank*.json"))]
        cf = with_sharing(load_cluster_file(args.update), ranks)
        cf.save(args.out or args.update)
    elif args.from_records is not None:
        files = sorted(args.from_records.glob("rank*.json"))
        if len(files) < 2:
            raise TestbedError(f"{args.from_records}: found {len(files)} rank*.json files; need "
                               "one per host (at least 2)")
        ranks = [json.loads(f.read_text()) for f in files]
        cf, prof = build_cluster_file(ranks, name=args.out.stem, comm_uses_compute=cuc)
        cf.save(args.out)
        if args.profile_out is not None and prof is not None:
            from ..workload import ModelProfile

            ModelProfile.from_dict(prof).save(args.profile_out)
    else:
        cf = calibrate_testbed(workers=args.workers, rate=args.rate, burst=args.burst,
                               delay=args.delay, model=args.model, batch=args.batch,
                               out=args.out, profile_out=args.profile_out,
                               comm_uses_compute=cuc, records_out=args.records_out,
                               update=args.update)
    lk = cf.link
    print(f"{cf.name}: bandwidth {lk.bandwidth * 8 / 1e6:.1f} Mbit/s, latency "
          f"{lk.latency * 1e6:.0f} us, burst {lk.burst / 1e3:.1f} kB, incast "
          f"{ {k: round(v, 3) for k, v in (lk.incast or {}).items()} }, sharing "
          f"{dict(lk.share_cv or {})}; cpu {dict(cf.cpu)}; "
          f"ps {dict(cf.ps)}; local step {dict(cf.local_step_s)}")
    for n in cf.notes:
        print(f"note: {n}")
    print(f"cluster file -> {args.out or args.update}")
    return 0
