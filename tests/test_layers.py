"""The architecture's import rules (docs/architecture.md), read statically from the source:
imports point one way (net <- engine/analysis <- variants <- prediction <- study/cli), the
variants import no engine, only the CLI imports viz, and no two modules import each other
through any chain (module-level or deferred imports alike)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "sgdnet"

#: Rank of each top-level component: a module may import its own component or lower ranks.
RANK = {
    "errors": 0, "_version": 0, "_text": 0, "_gc": 0, "_interrupts": 0,
    "_lazy": 0,  # the lazy namespaces of the packages (PEP 562); imports no sgdnet module
    "units": 1, "_check": 1, "limits": 1,
    "_files": 2,  # reads user files; imports limits
    "dists": 2,
    "net": 3, "workload": 3,
    "analysis": 4, "models": 4, "profiling": 4,
    "estimate": 5, "results": 5.5,  # results builds Estimates
    "engine": 6,
    "variants": 7,  # beside the engine, not above it: test_variants_import_no_engine_or_analysis
    "netcache": 7.5,  # compiled nets by their inputs: net.compiled below, prediction and cli above
    "prediction": 8, "metrics": 8,
    "pipeline_metrics": 8,  # bubble, MFU, memory of a pipeline-parallel Result
    "anchor": 8.5,  # one-GPU anchoring: calls predict()
    "choose": 8.5,  # instances x nodes x variants, the Pareto front: calls predict()
    "accuracy": 8.5,  # update schedules of runs, their replay, time to accuracy: calls predict()
    "plan_search": 8.5,  # (tp, pp, dp, m) plans that fit memory, fastest first: calls predict()
    "study": 9, "viz": 9, "testbed": 9,
    "cli_args": 9.5,  # the parser; cli binds the commands to it
    "cli_inputs": 9.7,  # what the commands share: inputs from the arguments, the cached net
    "cli": 10,
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """sgdnet modules imported anywhere in ``path`` (relative imports resolved)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "sgdnet")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "sgdnet":
                continue
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES]
            out.update(subs or [mod])
    out.discard(name)
    return {m for m in out if m in MODULES}


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _component(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "sgdnet"


def test_every_component_has_a_rank():
    assert {_component(m) for m in MODULES} - {"sgdnet"} <= set(RANK)


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if m != "sgdnet"))
def test_imports_point_down(mod):
    me = _component(mod)
    bad = [d for d in sorted(GRAPH[mod]) if _component(d) != me
           and (d == "sgdnet" or RANK[_component(d)] >= RANK[me])]
    assert not bad, f"{mod} imports {bad}, which sit at or above its layer"


def test_only_cli_imports_viz():
    users = sorted(m for m, deps in GRAPH.items()
                   if _component(m) not in ("viz", "cli") and any(_component(d) == "viz" for d in deps))
    assert users == []


def test_variants_import_no_engine_or_analysis():
    for m, deps in GRAPH.items():
        if _component(m) == "variants":
            assert not {_component(d) for d in deps} & {"engine", "analysis", "results"}, m


def test_no_import_cycles():
    """No strongly connected component of more than one module (Tarjan)."""
    graph = {m: deps for m, deps in GRAPH.items() if m != "sgdnet"}
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w == "sgdnet" or w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert sccs == []


def test_modules_stay_small():
    # issue #11: "no module under sgdnet/ over ~600 lines"; the few between 600 and 700 (the
    # oracle, the periodic-regime jumps, the results) are one concept each, and a module growing
    # past 700 is split (the event-graph record left fastpath.py so)
    big = {name: n for name, p in _modules().items()
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 700}
    assert not big, f"modules over 700 lines: {big}; split them by concept"


def test_the_kernel_is_a_package_of_small_modules():
    # issue #41: the kernel, once one 2,500-line file, is one module per concept, none over 600
    kernel = {name: len(p.read_text(encoding="utf-8").splitlines())
              for name, p in _modules().items() if name.startswith("sgdnet.engine.kernel.")}
    assert len(kernel) >= 10 and max(kernel.values()) <= 600, kernel
