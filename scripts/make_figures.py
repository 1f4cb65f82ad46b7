"""Make the README figures in docs/img/ (run from the repository root).

    python scripts/make_figures.py            # all figures
    python scripts/make_figures.py --only net timeline

Every figure is simulated from a built-in model profile and cluster with a fixed seed, so
re-running the script reproduces the images (up to font rendering). PNGs are kept < 200 KB.
"""

from __future__ import annotations

import argparse
import os
import sys

import matplotlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run from a checkout without installing
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import sgdnet  # noqa: E402
from sgdnet import Cluster, variants, viz  # noqa: E402
from sgdnet.viz.style import paper_rc  # noqa: E402

OUT = os.path.join(ROOT, "docs", "img")
SEED = 2024
DPI = 150


def _save(fig, name: str) -> str:
    """Save ``fig`` as docs/img/``name``, reduced to a 256-colour palette (matplotlib line art
    has few distinct colours, so this is visually lossless and makes the committed PNGs ~3x
    smaller)."""
    from PIL import Image  # a dependency of matplotlib

    path = os.path.join(OUT, name)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.03, facecolor="white")
    plt.close(fig)
    with Image.open(path) as im:
        pal = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    pal.save(path, optimize=True)
    size = os.path.getsize(path)
    print(f"{path}: {size / 1024:.0f} KB")
    if size > 200 * 1024:
        print(f"  warning: {name} is larger than 200 KB", file=sys.stderr)
    return path


def _cluster(workers: int = 4) -> Cluster:
    """The figures' cluster: 10 Gb/s NICs, 10% compute and communication noise, and ~10 ms of
    PS optimizer work per 100 MB of gradients (``update_s_per_byte``) so that the PS update is a
    timed operation that shows in the drawing and on the timeline."""
    return Cluster(workers=workers, bandwidth="10Gbps", compute_cv=0.1, comm_cv=0.1, update_s_per_byte=1e-10)


def fig_net() -> None:
    """The compiled 4-worker sync-PS net (ResNet-50 grouped into 3 layer groups)."""
    net = variants.build("sync-ps", "resnet50", _cluster(), max_layers=3)
    ax = viz.draw_net(net, title="sync-ps, 4 workers, ResNet-50 in 3 layer groups")
    _save(ax.figure, "net_sync_ps_4w.png")


def fig_timeline() -> None:
    """Gantt chart of 4-worker sync-PS training of ResNet-50 at 10 Gb/s with stragglers."""
    net = variants.build("sync-ps", "resnet50", _cluster(), max_layers=8)
    res = sgdnet.simulate(net, steps=60, warmup=10, replications=1, seed=SEED, trace=True, parallel=False)
    with plt.rc_context(paper_rc()):
        fig, ax = plt.subplots(figsize=(7.0, 3.6))
    viz.timeline(res, ax=ax, n_steps=3, labels=False, title="sync-ps, ResNet-50 (8 layer groups), 4 workers, 10 Gb/s")
    _save(fig, "timeline_sync_ps.png")


def fig_scaling() -> None:
    """Throughput vs workers for three variants (ResNet-50, 10 Gb/s), 95% CI bands."""
    workers = [1, 2, 4, 8, 16]
    base = Cluster(workers=1, bandwidth="10Gbps", compute_cv=0.1, comm_cv=0.1)
    data = {}
    for v in ("sync-ps", "allreduce", "async-ps"):
        if v not in variants.names():
            continue
        data[v] = sgdnet.scaling(v, "resnet50", base, workers=workers, steps=150, warmup=20,
                                 replications=4, seed=SEED, max_layers=16)
    with plt.rc_context(paper_rc()):
        fig, ax = plt.subplots(figsize=(3.4, 2.6))
    viz.plot_scaling(data, ax=ax, title="ResNet-50, 10 Gb/s")
    _save(fig, "scaling_resnet50.png")


FIGURES = {"net": fig_net, "timeline": fig_timeline, "scaling": fig_scaling}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(FIGURES), help="figures to make (default: all)")
    args = ap.parse_args(argv)
    try:
        known = variants.names()
    except ImportError as e:  # the registry imports every built-in variant module
        raise SystemExit(f"cannot make the figures: the variant registry does not load ({e})") from None
    if "sync-ps" not in known:
        raise SystemExit(f"cannot make the figures: variant 'sync-ps' is not registered (known: {known})")
    os.makedirs(OUT, exist_ok=True)
    for name in args.only or FIGURES:
        FIGURES[name]()


if __name__ == "__main__":
    main()
