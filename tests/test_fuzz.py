"""Fuzz (issue #17): a few hundred random nets through the Numba kernel and the pure-Python
oracle, and a few hundred random bad inputs to the public API and the CLI.

Nets: fixed generator seeds; arbitrary small nets (not only live ones: deadlocks, unbounded
places, zero-duration cycles, inhibitors, fifo / priority / ps resources, 1, 2 or infinite
servers) with deterministic durations on a 1/8 grid (exact ties) or, one net in three, random
ones (exponential, log-normal, uniform; zero durations kept): both engines draw firing k of a
transition from draw k of its stream (sgdnet.engine.rng), so they must give the same run or the
same error class either way. Every case runs in a worker process under a per-case wall-clock limit
enforced here (the worker is killed and the test fails naming the seed).

Bad inputs: every one must end in an SgdnetError (API) or one line on stderr and exit status 2
(CLI), never another exception, a traceback or a hang (per-case limit again).
"""

from __future__ import annotations

import math
import os
import random
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

#: one xdist worker runs the whole module (``--dist loadgroup``, setup.cfg): its module-scoped
#: worker process would otherwise be started again on each worker that gets one of its tests
pytestmark = pytest.mark.xdist_group("fuzz")

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
N_NETS = 300
N_API = 300
N_CLI = 120
CASE_LIMIT_S = 60.0  # generous: a loaded 2-core CI machine; a healthy case takes milliseconds


# ---------------------------------------------------------------------------- random nets
def random_net(seed: int):
    from sgdnet import Net
    from sgdnet.dists import Deterministic, Exponential, LogNormal, Uniform

    rng = np.random.default_rng(seed)
    net = Net(f"fuzz{seed}")
    places = [net.place(f"p{i}", tokens=int(rng.integers(i == 0, 4))).name
              for i in range(int(rng.integers(2, 7)))]
    res = [net.resource(f"r{i}", int(rng.integers(1, 3)),
                        ("fifo", "priority", "ps")[int(rng.integers(3))]).name
           for i in range(int(rng.integers(0, 3)))]
    n_trans = int(rng.integers(2, 7))
    for k in range(n_trans):
        pick = lambda n: [places[i] for i in rng.choice(len(places), n, replace=False)]  # noqa: E731
        # a backbone cycle p0 -> t0 -> p1 -> ... keeps most nets live; extra random arcs (and
        # weights, inhibitors, resources) make deadlocks, unbounded places and zero-time loops
        inputs = {places[k % len(places)]: 1}
        outputs = {places[(k + 1) % len(places)]: 1} if k < n_trans - 1 else {places[0]: 1}
        if rng.random() < 0.4:
            inputs.update({p: int(rng.integers(1, 3)) for p in pick(1)})
        if rng.random() < 0.5:
            outputs.update({p: int(rng.integers(1, 3)) for p in pick(int(rng.integers(1, 3)))})
        inhib = {p: int(rng.integers(1, 4)) for p in pick(1)} if rng.random() < 0.2 else None
        held = [res[i] for i in range(len(res)) if rng.random() < 0.4]
        d = 0.0 if rng.random() < 0.1 else int(rng.integers(1, 17)) / 8
        dist = Deterministic(d)
        if seed % 3 == 2 and d > 0:  # random durations: both engines draw the same numbers
            dist = (Exponential(d), LogNormal(mean=d, cv=0.5), Uniform(0.5 * d, 1.5 * d))[k % 3]
        servers = (1, 2, math.inf)[int(rng.integers(3))]
        net.transition(f"t{k}", dist, inputs=inputs, outputs=outputs,
                       inhibitors=inhib, resources=held, servers=servers,
                       priority=int(rng.integers(0, 3)), tags={"step": k == 0})
    return net


def run_net_case(seed: int) -> str:
    """'ok ...' when kernel and oracle agree (same run or same error class), else 'FAIL ...'."""
    from sgdnet import simulate
    from sgdnet.engine.reference import simulate_reference
    from sgdnet.errors import SgdnetError

    net = random_net(seed)
    kw = dict(steps=40, warmup=4, replications=1, seed=seed, max_events=5000)
    out = []
    for sim in (simulate, simulate_reference):
        try:
            out.append(sim(net, **kw))
        except SgdnetError as e:
            out.append(e)
        except Exception as e:  # noqa: BLE001 - the finding: anything else is a defect
            return f"FAIL {seed} {sim.__name__} raised {type(e).__name__}: {e}"
    k, r = out
    if isinstance(k, Exception) or isinstance(r, Exception):
        if type(k) is not type(r):
            return f"FAIL {seed} kernel -> {k!r:.200} but oracle -> {r!r:.200}"
        return f"ok {seed} {type(k).__name__}"
    # ps shares are rounded differently by the two engines (the kernel keeps a virtual clock, the
    # oracle advances every holder): with dozens of holders (an unbounded place feeding
    # servers=inf) completions that tie exactly may swap; such nets agree to 1%, others exactly
    ps = any(res.discipline == "ps" for res in net.resources.values())
    tol = 1e-2 if ps else 1e-9
    if not math.isclose(k.throughput.mean, r.throughput.mean, rel_tol=tol):
        return f"FAIL {seed} throughput {k.throughput.mean} != {r.throughput.mean}"
    for t in net.transitions:
        a, b = int(k.firings(t)[0]), int(r.firings(t)[0])
        if a != b and not (ps and abs(a - b) <= max(1, tol * max(a, b))):
            return f"FAIL {seed} firings of {t}: {a} != {b}"
    return f"ok {seed} {k.throughput.mean:.6g}"


# ---------------------------------------------------------------------------- bad API inputs
_JUNK = [None, -1, 0, 1.5, math.nan, math.inf, -math.inf, 10**30, 2**63, "x", "", "10", b"x",
         [], [1, "a"], {}, {"a": -1}, (1,), object(), True, np.int64(-3), np.float64("nan"),
         "1e400s", "-5ms", "5 parsecs"]


def bad_api_call(seed: int):
    """One random call of a public entry point with one junk argument: ``(label, thunk)``."""
    import sgdnet
    from sgdnet import Cluster, Estimate, Net, simulate, units
    from sgdnet.dists import Exponential, Gamma, LogNormal, Uniform

    rnd = random.Random(seed)
    junk = rnd.choice(_JUNK)

    def good_net():
        net = Net("g")
        a, b = net.place("a", tokens=1), net.place("b")
        net.transition("w", Exponential(0.01), inputs={a: 1}, outputs={b: 1})
        net.transition("s", 0.0, inputs={b: 1}, outputs={a: 1}, tags={"step": True})
        return net

    def net_with(**kw):
        net = Net("j")
        a = net.place("a", tokens=kw.pop("tokens", 1))
        net.transition("s", kw.pop("duration", 1.0), inputs=kw.pop("inputs", {a: 1}),
                       outputs=kw.pop("outputs", {a: 1}), tags={"step": True}, **kw)
        return simulate(net, steps=5, warmup=0, replications=1, seed=0)

    calls = [
        ("simulate steps", lambda: simulate(good_net(), steps=junk, replications=1)),
        ("simulate warmup", lambda: simulate(good_net(), steps=5, warmup=junk, replications=1)),
        ("simulate replications", lambda: simulate(good_net(), steps=5, replications=junk)),
        ("simulate seed", lambda: simulate(good_net(), steps=5, replications=1, seed=junk)),
        ("simulate seeds", lambda: simulate(good_net(), steps=5, seeds=junk)),
        ("simulate max_events", lambda: simulate(good_net(), steps=5, max_events=junk)),
        ("simulate trace_limit", lambda: simulate(good_net(), steps=5, trace=True,
                                                  trace_limit=junk)),
        ("simulate net", lambda: simulate(junk)),
        ("place tokens", lambda: net_with(tokens=junk)),
        ("transition duration", lambda: net_with(duration=junk)),
        ("transition inputs", lambda: net_with(inputs=junk)),
        ("transition outputs", lambda: net_with(outputs=junk)),
        ("transition servers", lambda: net_with(servers=junk)),
        ("transition priority", lambda: net_with(priority=junk)),
        ("Cluster workers", lambda: Cluster(workers=junk)),
        ("Cluster bandwidth", lambda: Cluster(bandwidth=junk)),
        ("Cluster latency", lambda: Cluster(latency=junk)),
        ("Cluster compute_cv", lambda: Cluster(compute_cv=junk)),
        ("Cluster speeds", lambda: Cluster(workers=2, speeds=junk)),
        ("Cluster unknown", lambda: Cluster(**{str(rnd.random()): junk})),
        ("Estimate.quantile", lambda: Estimate([1.0, 2.0]).quantile(junk)),
        ("units.seconds", lambda: units.seconds(junk)),
        ("units.bandwidth", lambda: units.bandwidth(junk)),
        ("units.nbytes", lambda: units.nbytes(junk)),
        ("Exponential", lambda: Exponential(junk)),
        ("Gamma", lambda: Gamma(1.0, junk)),
        ("LogNormal", lambda: LogNormal(junk, 0.1)),
        ("Uniform", lambda: Uniform(junk, 1.0)),
        ("models.load", lambda: sgdnet.models.load(junk)),
        ("predict model", lambda: sgdnet.predict("sync-ps", junk, Cluster(workers=2),
                                                 steps=5, warmup=1, replications=1)),
        ("predict variant", lambda: sgdnet.predict(junk, "resnet18", Cluster(workers=2),
                                                   steps=5, warmup=1, replications=1)),
        ("predict option", lambda: sgdnet.predict("ssp", "resnet18", Cluster(workers=2),
                                                  granularity="coarse", steps=5, warmup=1,
                                                  replications=1, staleness=junk)),
        ("predict granularity", lambda: sgdnet.predict("sync-ps", "resnet18",
                                                       Cluster(workers=2), granularity=junk,
                                                       steps=5, warmup=1, replications=1)),
        ("Study grid", lambda: sgdnet.Study(grid=junk)),
        ("Study replications", lambda: sgdnet.Study(grid={"variant": ["a"]},
                                                   replications=junk)),
    ]
    return calls[seed % len(calls)][0] + f" with {junk!r:.40}", calls[seed % len(calls)][1]


# a junk value that a parameter happens to accept is fine: the call may succeed
def run_api_case(seed: int) -> str:
    from sgdnet.errors import SgdnetError

    label, thunk = bad_api_call(seed)
    try:
        thunk()
    except SgdnetError:
        return f"ok {seed}"
    except Exception as e:  # noqa: BLE001
        return f"FAIL {seed} {label}: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
    return f"ok {seed} accepted"


# ---------------------------------------------------------------------------- bad CLI inputs
_CLI_JUNK = ["", "-1", "0", "x", "1e400", "nan", "inf", "10", "1,,2", "1 2 x", "99999999999",
             "10 parsecs", "-5ms", "'", "--", "1,1", "0.5", "\x00", "é", "--workers"]
_CLI_FLAGS = {
    "predict": ["--workers", "--bandwidth", "--latency", "--steps", "--warmup", "--replications",
                "--seed", "--compute-cv", "--comm-cv", "--speeds", "--straggler", "--model",
                "--variant", "--granularity", "--ps-shards", "--batch-size", "--option",
                "--device", "--precision"],
    "draw": ["--workers", "--bandwidth", "--latency", "--model", "--straggler", "--ps-shards",
             "--speeds", "--option"],
    "trace": ["--workers", "--steps", "--warmup", "--bandwidth", "--latency", "--seed",
              "--variant", "--straggler"],
}


def bad_cli_argv(seed: int, tmp: str) -> list[str]:
    rnd = random.Random(seed)
    cmd = rnd.choice(sorted(_CLI_FLAGS))
    flag = rnd.choice(_CLI_FLAGS[cmd])
    base = {"predict": ["predict", "--variant", "sync-ps", "--model", "resnet18", "--workers",
                        "1", "--steps", "3", "--warmup", "1", "--replications", "1",
                        "--granularity", "coarse", "--no-progress"],
            "draw": ["draw", "sync-ps", "--model", "resnet18", "--workers", "2",
                     "--out", os.path.join(tmp, f"d{seed}.dot")],
            "trace": ["trace", "--variant", "sync-ps", "--model", "resnet18", "--workers", "2",
                      "--steps", "3", "--warmup", "1", "--granularity", "coarse",
                      "--out", os.path.join(tmp, f"t{seed}.json")]}[cmd]
    value = rnd.choice(_CLI_JUNK)
    if flag == "--option":
        value = rnd.choice(["staleness=-1", "nosuch=1", "=", "staleness=x", "x"])
    if flag == "--variant" and cmd == "draw":
        flag = "--model"
    return [*base, flag, value]


def run_cli_case(seed: int, tmp: str) -> str:
    import contextlib
    import io

    from sgdnet.cli import main

    argv = bad_cli_argv(seed, tmp)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except BaseException as e:  # noqa: BLE001 - SystemExit or anything escaping main
        return f"FAIL {seed} {argv[-2:]}: main raised {type(e).__name__}: {e}"
    # the first run's JIT notice ("sgdnet: compiling ..." / "sgdnet: engine compiled ...") is
    # information, not part of the error
    lines = [ln for ln in err.getvalue().strip().splitlines()
             if not ln.startswith(("sgdnet: compiling", "sgdnet: engine compiled"))]
    if code == 0:
        return f"ok {seed} accepted"
    if code != 2 or len(lines) != 1 or "Traceback" in err.getvalue():
        return f"FAIL {seed} {argv[-2:]}: exit {code}, stderr {err.getvalue()[:300]!r}"
    return f"ok {seed}"


# ---------------------------------------------------------------------------- the harness
def serve() -> None:  # pragma: no cover - runs in the worker process
    """Read ``kind seed [arg]`` lines on stdin; answer one line per case on stdout."""
    import warnings

    warnings.simplefilter("ignore")
    for line in sys.stdin:
        kind, seed, *rest = line.split()
        fn = {"net": run_net_case, "api": run_api_case, "cli": run_cli_case,
              "sleep": lambda s: time.sleep(3600)}[kind]
        try:
            ans = fn(int(seed), *rest)
        except BaseException as e:  # noqa: BLE001
            ans = f"FAIL {seed} harness: {type(e).__name__}: {e}"
        print(ans.replace("\n", " "), flush=True)


class Worker:
    """A worker process answering the cases of :func:`serve`, killed on a hang or a death.

    The tests of this module share one (:func:`worker`): the worker imports numpy, sgdnet and
    numba once, not once per test; a test that kills it (a hang) leaves the next one a new one.
    """

    def __init__(self):
        env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{REPO}", "SGDNET_DEBUG": ""}
        self.proc = subprocess.Popen([sys.executable, "-c", "import test_fuzz; test_fuzz.serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env, cwd=str(REPO))
        self.answered = 0

    def alive(self) -> bool:
        """Whether the process still runs (it may serve more cases)."""
        return self.proc.poll() is None

    def ask(self, case: str) -> str:
        """One case's answer line; the test fails (and the worker is killed) on a hang or a
        death."""
        self.proc.stdin.write(case + "\n")
        self.proc.stdin.flush()
        limit = CASE_LIMIT_S * (4 if not self.answered else 1)  # the first case imports numba
        ready, _, _ = select.select([self.proc.stdout], [], [], limit)
        if not ready:
            self.close()
            pytest.fail(f"case {case!r} still running after {limit:.0f} s: a hang")
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            pytest.fail(f"the worker died on case {case!r} (exit {self.proc.wait()})")
        self.answered += 1
        return line.strip()

    def close(self) -> None:
        """Kill the process and reap it."""
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def worker():
    """A function returning the module's live :class:`Worker` (a new one after a hang)."""
    box: list[Worker] = []

    def get() -> Worker:
        if not box or not box[0].alive():
            box[:] = [Worker()]
        return box[0]

    yield get
    if box:
        box[0].close()


def run_cases(cases: list[str], worker: Worker | None = None) -> list[str]:
    """The answers to ``cases``, asked of ``worker`` (default: a worker of their own, killed
    after them)."""
    own = worker is None
    w = Worker() if own else worker
    try:
        return [w.ask(case) for case in cases]
    finally:
        if own:
            w.close()


def _check(answers: list[str]) -> None:
    failed = [a for a in answers if not a.startswith("ok")]
    assert not failed, f"{len(failed)} of {len(answers)} cases failed:\n" + "\n".join(failed[:20])


def test_random_nets_kernel_and_oracle_agree_under_a_time_limit(worker):
    answers = run_cases([f"net {s}" for s in range(N_NETS)], worker())
    _check(answers)
    kinds = {a.split()[2] if len(a.split()) > 2 else "" for a in answers}
    # the generator reaches every outcome: finished runs and both failure reports
    assert {"DeadlockError", "SimulationError"} <= kinds, kinds
    assert sum(1 for a in answers if a.split()[2][0].isdigit()) > 100  # finished runs


def test_random_bad_api_inputs_end_in_sgdnet_errors(worker):
    answers = run_cases([f"api {s}" for s in range(N_API)], worker())
    _check(answers)
    assert sum(a == f"ok {i}" for i, a in enumerate(answers)) > N_API // 2  # mostly refused


def test_random_bad_cli_inputs_end_in_one_line_and_exit_2(tmp_path, worker):
    answers = run_cases([f"cli {s} {tmp_path}" for s in range(N_CLI)], worker())
    _check(answers)
    assert sum(a == f"ok {i}" for i, a in enumerate(answers)) > N_CLI // 2


def test_harness_catches_a_hang(monkeypatch, worker):
    # the limit is enforced: a case that sleeps past it fails the test rather than hanging it
    # (0.05 s, 0.2 s for a worker's first case: the sleeping case never answers, however slow
    # the worker's start), on a worker of its own and on the shared one
    monkeypatch.setattr(sys.modules[__name__], "CASE_LIMIT_S", 0.05)
    with pytest.raises(pytest.fail.Exception, match="still running"):
        run_cases(["sleep 0"])
    shared = worker()
    with pytest.raises(pytest.fail.Exception, match="still running"):
        run_cases(["sleep 0"], shared)
    assert not shared.alive()  # killed, not left running
    assert worker() is not shared and worker().alive()  # the next test gets a new worker

