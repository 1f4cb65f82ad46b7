"""``sgdnet testbed`` and ``sgdnet calibrate``: parsers and commands (wired in by sgdnet.cli).

::

    sgdnet testbed --workers 1,2,3,4 --rates 100Mbit/s,200Mbit/s --repeats 3 --out runs.json
    sgdnet testbed --smoke                                   # 2 hosts, a few steps, < 1 minute
    sgdnet calibrate --workers 4 --rate 100Mbit/s --out cluster-100.yaml --profile-out p.json
    sgdnet calibrate --workers 3 --rate 50Mbit/s --repeats 5 --burst 64KiB --queue 50ms --out c.yaml
    sgdnet calibrate --write-spec spec.json --master 10.0.0.1 --world 5 --records-dir /shared/cal
    sgdnet calibrate --from-records /shared/cal --out cluster.yaml     # any gloo cluster
    sgdnet calibrate --compare a.yaml b.yaml       # do two calibrations agree within their CIs?

``sgdnet calibrate`` exits with 0 when the file is written and its quality is good (or, with
one repeat, not judged), 3 (:data:`sgdnet.cli_args.EXIT_LOW_QUALITY`) when it is written but
of low quality (``calibration.quality: low``: an interval wider than ``--max-ci``, a fit still
off after dropping outliers, or the quiet gate flagged a job), and 2 / 1 on bad input / a file
error like every command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import TestbedError

__all__ = ["add_parsers", "cmd_testbed", "cmd_calibrate", "describe", "compare_calibrations",
           "EXIT_LOW_QUALITY"]

#: Exit status of ``sgdnet calibrate`` whose file is written but of low quality (the same
#: number as :data:`sgdnet.cli_args.EXIT_LOW_QUALITY`; the testbed layer cannot import the CLI).
EXIT_LOW_QUALITY = 3


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


def _fraction(text: str) -> float:
    t = text.strip()
    try:
        x = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction, e.g. 0.25 or 25%"
                                         ) from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0, e.g. 0.25 or 25%")
    return x


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
    from .runner import DEFAULT_SCHEMES, SCHEMES

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
    p.add_argument("--schemes", type=_strs, default=list(DEFAULT_SCHEMES),
                   help=f"some of {','.join(SCHEMES)} (default {','.join(DEFAULT_SCHEMES)})")
    p.add_argument("--staleness", type=int, default=3,
                   help="the ssp scheme's bound s: a worker at most s steps ahead (default 3)")
    p.add_argument("--repeats", type=_pos_int, default=3, help="repeats, interleaved (default 3)")
    p.add_argument("--steps", type=_pos_int, default=12, help="measured steps (default 12)")
    p.add_argument("--warmup", type=_pos_int, default=3, help="warm-up steps (default 3)")
    p.add_argument("--bucket-cap-mb", type=float, default=0.5,
                   help="DDP bucket_cap_mb (default 0.5)")
    p.add_argument("--burst", default="64KB",
                   help="token-bucket depth: 64KB = 64000 bytes, 64KiB = 65536 (tc's 64kb); "
                        "'64kb' is refused as ambiguous (default 64KB)")
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
                    "Cluster.from_file() and --cluster read, every figure with its 95% "
                    "interval over --repeats runs. Exit status: 0 written and of good quality "
                    "(or not judged, one repeat); 3 written but of low quality (an interval "
                    "too wide, a bad fit, or the quiet gate flagged a job: the file's "
                    "calibration.problems say which); 2 bad input; 1 a file error.")
    p.add_argument("--out", type=Path, help="cluster file to write (.yaml)")
    p.add_argument("--profile-out", type=Path, help="also write the single-worker profile (.json)")
    p.add_argument("--records-out", type=Path, help="also write every host's raw records (.json)")
    p.add_argument("--workers", type=_pos_int, default=4,
                   help="worker hosts (plus one PS host) of the emulated cluster (default 4)")
    p.add_argument("--rate", default="100Mbit/s", help="emulated link rate (default 100Mbit/s)")
    p.add_argument("--burst", default="64KB",
                   help="emulated token-bucket depth in bytes: 64KB = 64000, 64KiB = 65536 "
                        "(tc's 64kb); passed to tc as exact bytes; '64kb' is refused as "
                        "ambiguous (default 64KB)")
    p.add_argument("--queue", default="100ms",
                   help="emulated tbf queue: how long a packet may wait in the shaper before "
                        "it is dropped (tc tbf latency; default 100ms)")
    p.add_argument("--delay", default="0", help="emulated one-way delay (needs netem)")
    p.add_argument("--repeats", type=_pos_int, default=3,
                   help="run the job list this many times, interleaved; every figure is their "
                        "mean with a 95%% interval in the file's calibration block (default 3; "
                        "1: no intervals, quality not judged)")
    p.add_argument("--quiet-threshold", type=float, default=None, metavar="CORES",
                   help="the quiet gate flags a job when other processes used more cores "
                        "(default 0.5); a flagged job makes the exit status 3")
    p.add_argument("--max-ci", type=_fraction, default=None, metavar="FRACTION",
                   help="largest half-width of a figure's 95%% interval relative to its value "
                        "before the calibration is judged low quality (default 0.25; share_cv "
                        "+-0.1 and the incast slope +-0.05 absolute)")
    p.add_argument("--drop-residual", type=_fraction, default=0.25, metavar="FRACTION",
                   help="drop a point from the link, reduce or update fit when its relative "
                        "residual exceeds this, noted (default 0.25)")
    p.add_argument("--profile", type=Path, metavar="PROFILE",
                   help="your model's profile (.json): its step time and optimizer time replace "
                        "calibrate's own model's local step and PS update cost in the file")
    p.add_argument("--ps-probe", action="store_true",
                   help="also run the PS-traffic probe (your --profile's gradients, else the "
                        "testbed model's) and fit the PS host's downlink efficiency to it "
                        "(link.ps_efficiency; predict with burst='file'); a few minutes more")
    p.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"),
                   help="compare two calibrated files figure by figure: whether their 95%% "
                        "intervals overlap (exit 3 when one does not), then stop")
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
                              staleness=args.staleness,
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

    if args.compare is not None:
        from ..workload.cluster_file import load_cluster_file

        rows = compare_calibrations(*(load_cluster_file(f) for f in args.compare))
        print(f"{'figure':28s} {'A':>34s} {'B':>34s}  overlap")
        for r in rows:
            print(f"{r['figure']:28s} {r['a']:>34s} {r['b']:>34s}  {'yes' if r['overlap'] else 'NO'}")
        bad = [r["figure"] for r in rows if not r["overlap"]]
        print(f"{len(rows) - len(bad)} of {len(rows)} figures agree within their 95% intervals"
              + (f"; not: {', '.join(bad)}" if bad else ""))
        return EXIT_LOW_QUALITY if bad or not rows else 0
    cuc = {"auto": None, "true": True, "false": False}[args.comm_uses_compute]
    if args.nccl_gpu:
        cuc = False
    if args.write_spec is not None:
        if not args.master or not args.world:
            raise TestbedError("--write-spec needs --master ADDR and --world N (hosts, rank 0 "
                               "= the PS host)")
        spec = {"world": args.world, "master": args.master, "port": 29500,
                "ifname": args.ifname, "threads": 1, "timeout_s": 600,
                "jobs": calibration_jobs(args.world, model=args.model, batch=args.batch,
                                         repeats=args.repeats),
                "out_dir": args.records_dir}
        args.write_spec.write_text(json.dumps(spec, indent=1))
        print(f"spec -> {args.write_spec}; on host r run: python -m sgdnet.testbed.worker "
              f"{args.write_spec.name} r   (then: sgdnet calibrate --from-records "
              f"{args.records_dir} --out cluster.yaml)")
        return 0
    if args.out is None and args.update is None:
        raise TestbedError("give --out cluster.yaml (or --update FILE, or --write-spec SPEC)")
    from .calibrate import combine_repeats, save_cluster_file, split_repeats, with_profile

    if args.update is not None and args.from_records is not None:
        from ..workload.cluster_file import load_cluster_file
        from .calibrate import with_sharing

        ranks = [json.loads(f.read_text()) for f in sorted(args.from_records.glob("rank*.json"))]
        base = load_cluster_file(args.update)
        cf = combine_repeats([with_sharing(base, rk) for rk in split_repeats(ranks)],
                             only=("link.share_cv",), max_rel_ci=args.max_ci)
        save_cluster_file(cf, args.out or args.update)
        print(f"cluster file -> {args.out or args.update}")
    elif args.from_records is not None:
        files = sorted(args.from_records.glob("rank*.json"))
        if len(files) < 2:
            raise TestbedError(f"{args.from_records}: found {len(files)} rank*.json files; need "
                               "one per host (at least 2)")
        ranks = [json.loads(f.read_text()) for f in files]
        built = [build_cluster_file(rk, name=args.out.stem, comm_uses_compute=cuc,
                                    reject=args.drop_residual) for rk in split_repeats(ranks)]
        prof = next((p for _, p in built if p is not None), None)
        cf = combine_repeats([c for c, _ in built], comm_uses_compute=cuc,
                             max_rel_ci=args.max_ci)
        if args.profile is not None:
            from ..workload import ModelProfile

            cf = with_profile(cf, ModelProfile.load(args.profile))
        save_cluster_file(cf, args.out)
        print(f"cluster file -> {args.out}")
        if args.profile_out is not None and prof is not None:
            from ..workload import ModelProfile

            ModelProfile.from_dict(prof).save(args.profile_out)
    else:  # calibrate_testbed prints where the file went
        cf = calibrate_testbed(workers=args.workers, rate=args.rate, burst=args.burst,
                               delay=args.delay, queue=args.queue, model=args.model,
                               batch=args.batch, out=args.out, profile_out=args.profile_out,
                               comm_uses_compute=cuc, records_out=args.records_out,
                               update=args.update, repeats=args.repeats,
                               threshold_cores=args.quiet_threshold, reject=args.drop_residual,
                               max_rel_ci=args.max_ci, profile=args.profile,
                               ps_probe=args.ps_probe, log=lambda m: print(m, flush=True))
    for line in describe(cf):
        print(line)
    return EXIT_LOW_QUALITY if cf.calibration.get("quality") == "low" else 0


def _span(e: dict) -> tuple[float, float] | None:
    """A figure's interval; ``[0, upper_bound]`` when below resolution."""
    if e.get("below_resolution"):
        return 0.0, float(e["upper_bound"])
    return None if e.get("ci95") is None else (float(e["ci95"][0]), float(e["ci95"][1]))


def _txt(name: str, e: dict, sp: tuple[float, float]) -> str:
    v = ("< " + _fmt(name, sp[1])) if e.get("below_resolution") else _fmt(name, e["value"])
    return f"{v} [{_fmt(name, sp[0])} .. {_fmt(name, sp[1])}]"


def compare_calibrations(a: Any, b: Any) -> list[dict]:
    """Figure by figure, whether two calibrated cluster files agree: rows ``{figure, a, b,
    overlap}`` (``a``, ``b`` formatted ``value [lo .. hi]``) for every figure both have with an
    interval; ``overlap`` when the two 95 % intervals intersect."""
    fa = (a.calibration or {}).get("figures") or {}
    fb = (b.calibration or {}).get("figures") or {}
    rows = []
    for name in fa:
        if name not in fb:
            continue
        sa, sb = _span(fa[name]), _span(fb[name])
        if sa is None or sb is None:
            continue

        rows.append({"figure": name, "a": _txt(name, fa[name], sa), "b": _txt(name, fb[name], sb),
                     "overlap": sa[0] <= sb[1] and sb[0] <= sa[1]})
    return rows


def _fmt(name: str, x: float) -> str:
    """A figure in the unit a reader expects (by its name)."""
    if name == "link.latency":
        return f"{x * 1e6:.0f} us"
    if name == "link.bandwidth":
        return f"{x * 8 / 1e6:.1f} Mbit/s"
    if name == "link.burst":
        return f"{x / 1e3:.1f} kB"
    if name.endswith("_per_byte"):
        return f"{x * 1e9:.3g} ns/B"
    if name.endswith("_per_tensor"):
        return f"{x * 1e6:.3g} us"
    if name.startswith("local_step_s."):
        return f"{x * 1e3:.3g} ms"
    return f"{x:.3g}"


def describe(cf: Any) -> list[str]:
    """The lines ``sgdnet calibrate`` prints: every figure with its 95 % interval, ``n`` and
    worst residual (a latency below resolution as ``< X us``), the notes, then the verdict with
    its problems and what to do."""
    cal = cf.calibration or {}
    figs = cal.get("figures") or {}
    out = [f"{cf.name}: {cal.get('repeats', 1)} repeat(s); comm_uses_compute "
           f"{str(cf.comm_uses_compute).lower()}"]
    for name, e in figs.items():
        if e.get("below_resolution"):
            val = f"below resolution, < {_fmt(name, e['upper_bound'])}"
        else:
            ci = e.get("ci95")
            val = _fmt(name, e["value"]) + (f"  [{_fmt(name, ci[0])} .. {_fmt(name, ci[1])}]"
                                            if ci else "  (no interval: one repeat)")
        r = e.get("worst_rel_residual")
        out.append(f"  {name:28s} {val}  n={e.get('n', 1)}"
                   + (f"  worst residual {r:.0%}" if r is not None else ""))
    pse = (cf.measurements or {}).get("ps_efficiency") or {}
    rms = pse.get("rms", {})  # a file fitted before the intervals: the fit's rms only
    out += [f"  {'link.ps_efficiency.' + str(k):28s} {v:.2f}  (fitted to the PS probe, no "
            "interval" + (f"; rms {rms[k]:.1%})" if k in rms else ")")
            for k, v in (cf.link.ps_efficiency or {}).items()
            if k >= 2 and f"link.ps_efficiency.{k}" not in figs]
    out += [f"note: {n}" for n in cf.notes]
    out += [f"warning: {w}" for w in cal.get("warnings", ())]
    q = cal.get("quality")
    if q == "low":
        out += [f"problem: {p}" for p in cal.get("problems", ())]
        out.append("calibration quality: LOW (exit status 3). The file is written; before "
                   "trusting it: stop other jobs and calibrate again, or raise --repeats to "
                   "narrow the intervals, or pin with taskset; see the README's 'noisy machine' "
                   "paragraph.")
    elif q:
        out.append(f"calibration quality: {q}")
    return out
