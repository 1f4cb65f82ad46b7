"""Wall time, CPU time and peak RSS of ``sgdnet predict`` as a user runs it (issue #41).

Each figure is one ``sgdnet predict`` process (``python -m sgdnet.cli``), measured from outside:
wall clock, user + system CPU and peak resident set size of that very child (``os.wait4``).
Three states of the on-disk net cache, interleaved run by run so a busy machine slows all alike:

* ``uncached``: ``SGDNET_CACHE_DIR=""``, every run builds and compiles its net — what every run
  of the 1,024-worker command did before #41 (its net was over the cache's size threshold);
* ``cold``: an empty cache directory per run: built, compiled and written (in the background,
  while it simulates);
* ``warm``: a directory a previous run filled: the compiled net is loaded.

The printed tables of all runs must be identical (the "computed in" line aside): a cached net
gives the same numbers. A warm run that writes a file means the cache missed (a source file of
the package changed between runs, which changes every key): it is reported.

    PYTHONPATH=. python bench/bench_cli.py                 # the #41 command, 3 runs of each
    PYTHONPATH=. python bench/bench_cli.py --small         # the 8-worker warm start only
    PYTHONPATH=. python bench/bench_cli.py --runs 5 --states warm,uncached
    PYTHONPATH=. python bench/bench_cli.py --base /tmp/base   # and the tree in /tmp/base, as 'base'
    PYTHONPATH=. python bench/bench_cli.py --tree /tmp/new --base /tmp/base   # two frozen copies
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIG = ["predict", "--model", "resnet50", "--variant", "sync-ps", "--workers", "1024",
       "--bandwidth", "10Gbps", "--steps", "20"]
#: the tree measured (``--tree``; None: the sgdnet that ``python -m`` finds)
TREE: str | None = None
SMALL = ["predict", "--model", "resnet50", "--variant", "sync-ps", "--workers", "8",
         "--bandwidth", "10Gbps"]


def run_once(argv: list[str], cache: str, tree: str | None = None) -> dict:
    """One CLI process: wall s, CPU s (user + sys), peak RSS bytes, its table; ``tree``: the
    sgdnet source tree to run (first on ``PYTHONPATH``), default the one installed."""
    env = {**os.environ, "SGDNET_CACHE_DIR": cache}
    tree = tree or TREE
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        # run from a neutral directory: ``-m`` puts the working directory first on sys.path
        p = subprocess.Popen([sys.executable, "-m", "sgdnet.cli", *argv], env=env, stdout=out,
                             stderr=err, cwd=tempfile.gettempdir())
        _, status, ru = os.wait4(p.pid, 0)  # this child's own CPU and peak RSS
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if p.returncode:
        raise SystemExit(f"sgdnet {' '.join(argv)} failed ({p.returncode}): {errors}")
    table = "\n".join(ln for ln in text.splitlines() if not ln.startswith("computed in"))
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss * 1024,
            "table": table}


def _files(d: Path) -> set[str]:
    return {p.name for p in (d / "nets").glob("*.pkl")} if (d / "nets").is_dir() else set()


def measure(argv: list[str], states: list[str], runs: int,
            base: str | None = None) -> dict[str, list[dict]]:
    """``runs`` runs of each state, interleaved; a warm-up run fills the warm directory (and
    the base tree's, state ``base``: that tree with a warm cache, as its user runs it)."""
    out: dict[str, list[dict]] = {s: [] for s in states}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        warm = Path(tmp) / "warm"
        if "warm" in states:
            run_once(argv, str(warm))  # fills it (and pays a numba compile, if any)
        if "base" in states:
            run_once(argv, str(Path(tmp) / "base"), str(Path(base).resolve()))
        for i in range(runs):
            for s in states:
                if s == "base":
                    r = run_once(argv, str(Path(tmp) / "base"), str(Path(base).resolve()))
                elif s == "uncached":
                    r = run_once(argv, "")
                elif s == "cold":
                    r = run_once(argv, str(Path(tmp) / f"cold{i}"))
                else:
                    before = _files(warm)
                    r = run_once(argv, str(warm))
                    r["missed"] = _files(warm) != before
                out[s].append(r)
    return out


def report(name: str, argv: list[str], res: dict[str, list[dict]]) -> bool:
    """Print the medians; return whether every run printed the same table."""
    print(f"\n{name}: sgdnet {' '.join(argv)}")
    print(f"{'state':9s} {'runs':>4s} {'wall s (median)':>16s} {'CPU s':>7s} {'peak RSS':>9s}"
          f"  walls")
    med = {}
    for s, rs in res.items():
        w = statistics.median(r["wall"] for r in rs)
        c = statistics.median(r["cpu"] for r in rs)
        m = statistics.median(r["rss"] for r in rs)
        med[s] = (w, c, m)
        walls = ", ".join(f"{r['wall']:.2f}" for r in rs)
        print(f"{s:9s} {len(rs):4d} {w:16.2f} {c:7.2f} {m / 1e9:7.2f} GB  {walls}")
        if any(r.get("missed") for r in rs):
            print(f"  note: {sum(r.get('missed', False) for r in rs)} warm run(s) missed the "
                  "cache (a package source file changed meanwhile)")
    for ref in ("base", "uncached"):
        for s in ("cold", "warm"):
            if ref in med and s in med:
                w0, c0, m0 = med[ref]
                w, c, m = med[s]
                print(f"{s} / {ref}: wall {w / w0:.2f}x, CPU {c / c0:.2f}x, peak RSS "
                      f"{m / m0:.2f}x")
    tables = {r["table"] for rs in res.values() for r in rs}
    same = len(tables) == 1
    print("tables: identical in every run" if same else
          f"tables: {len(tables)} DIFFERENT tables printed")
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--states", default="uncached,cold,warm",
                    help="comma-separated: uncached, cold, warm")
    ap.add_argument("--small", action="store_true", help="only the 8-worker command, warm")
    ap.add_argument("--big-only", action="store_true", help="only the 1,024-worker command")
    ap.add_argument("--base", metavar="DIR", default=None,
                    help="another sgdnet tree (e.g. `git archive HEAD sgdnet models | tar -x "
                         "-C DIR`) measured as state 'base', interleaved")
    ap.add_argument("--tree", metavar="DIR", default=None,
                    help="the sgdnet tree measured in states uncached, cold and warm (default: "
                         "the one installed); a copy (`cp -a sgdnet models DIR/`, numba's "
                         "cache included) is not changed by edits made while it runs, which "
                         "change every net's key")
    args = ap.parse_args(argv)
    global TREE
    TREE = None if args.tree is None else str(Path(args.tree).resolve())
    states = [s for s in args.states.split(",") if s]
    if args.base is not None and "base" not in states:
        states.insert(0, "base")
    ok = True
    if not args.small:
        ok &= report("#41: fine sync-PS, ResNet-50, 1,024 workers", BIG,
                     measure(BIG, states, args.runs, args.base))
    if not args.big_only:
        small = [s for s in states if s in ("base", "warm")] or ["warm"]
        ok &= report("warm start: 8 workers", SMALL, measure(SMALL, small, args.runs, args.base))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
