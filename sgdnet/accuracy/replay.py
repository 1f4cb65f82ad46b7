"""Train a task with exactly a run's update schedule.

``kind="updates"``: update ``u`` computes each of its gradients on the version the schedule
says (the versions a later stale gradient needs are kept, the others dropped), sums them in
worker order, divides by their number (equal batches; else weights each by its samples) and
applies the result with ``task.apply(params, grad, lr)``. So a synchronous schedule is plain
mini-batch SGD with the mean of the workers' gradients and a one-gradient schedule of staleness
0 is sequential SGD, bit for bit.

``kind="local"``: every worker trains its own copy; after its ``H_i`` steps of round ``r``
``local-sgd`` replaces every copy by the average of all copies; ``cocod`` (Shen et al. 2019,
Algorithm 1) sets ``x_i <- avg_{r-1} + (x_i - snap_i^{r-1})`` (the average of the previous
round's snapshots plus the worker's own progress since), then snapshots ``snap_i^r = x_i``.
Local steps are taken in time order (workers are independent between averagings, and the
net orders a round's averaging after its last step and before any step that needs it); the
model evaluated is the workers' mean (the averaged sequence of the local-SGD analyses).

Batches: worker ``w``'s ``c``-th gradient uses the ``c``-th batch of its stream
(:func:`.tasks.batch_stream`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._check import is_int
from ..errors import VariantError
from .schedule import Schedule
from .tasks import batch_stream, get_task

__all__ = ["Curve", "replay"]


@dataclass
class Curve:
    """The loss along one replayed schedule.

    Attributes
    ----------
    updates : numpy.ndarray
        Updates applied (``kind="local"``: local steps taken) at each evaluation.
    time : numpy.ndarray
        Simulated seconds at each evaluation (0 for the initial model).
    samples : numpy.ndarray
        Training samples consumed by then.
    loss, accuracy : numpy.ndarray
        Held-out loss and accuracy.
    params : numpy.ndarray
        The final parameters.
    """

    updates: np.ndarray
    time: np.ndarray
    samples: np.ndarray
    loss: np.ndarray
    accuracy: np.ndarray
    params: np.ndarray

    def first(self, loss: float | None = None, accuracy: float | None = None,
              window: int = 1) -> int | None:
        """Index of the first evaluation at which the mean of the last ``window`` evaluations
        (fewer at the start) has ``loss <= loss`` (or ``accuracy >=``), or None.

        ``window=1`` is the first crossing; a longer window asks for the target to be held,
        not touched by one fluctuation of a curve near its noise floor.
        """
        x = self.loss if loss is not None else self.accuracy
        c = np.cumsum(np.r_[0.0, x])
        k = np.arange(1, x.size + 1)
        lo = np.maximum(k - int(window), 0)
        m = (c[k] - c[lo]) / (k - lo)
        hit = m <= loss if loss is not None else m >= accuracy
        j = np.flatnonzero(hit)
        return int(j[0]) if j.size else None


def _evaluate(tk, p: np.ndarray) -> tuple[float, float]:
    """``(loss, accuracy)``, in one pass when the task has ``evaluate``."""
    ev = getattr(tk, "evaluate", None)
    if ev is not None:
        lo, ac = ev(p)
        return float(lo), float(ac)
    return float(tk.loss(p)), float(tk.accuracy(p))


def _check_eval(eval_every: int) -> int:
    if not is_int(eval_every) or eval_every < 1:
        raise VariantError(f"eval_every={eval_every!r} must be an integer >= 1")
    return int(eval_every)


def replay(schedule: Schedule, task, lr: float = 0.5, seed: int = 0, eval_every: int = 1,
           params=None) -> Curve:
    """Train ``task`` with ``schedule``.

    Parameters
    ----------
    schedule : Schedule
    task : str or Task
        A built-in task name or a task object (:mod:`.tasks`).
    lr : float
        Learning rate of every update (and local step).
    seed : int
        Seed of the workers' batch streams.
    eval_every : int
        Evaluate the held-out loss after every ``eval_every`` updates (and the last one);
        ``kind="local"``: the workers' mean model after every ``eval_every`` local steps of
        all workers (in time order) and at every averaging.
    params : array, optional
        Initial parameters (default ``task.init()``).

    Returns
    -------
    Curve
    """
    tk = get_task(task)
    if not (isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0):
        raise VariantError(f"lr={lr!r} must be a positive number, e.g. 0.5")
    every = _check_eval(eval_every)
    p0 = np.asarray(tk.init() if params is None else params, dtype=float)
    if schedule.kind == "local":
        return _local(schedule, tk, float(lr), int(seed), p0, every)
    return _updates(schedule, tk, float(lr), int(seed), every, p0)


def _updates(s: Schedule, tk, lr: float, seed: int, every: int, p: np.ndarray) -> Curve:
    U = s.updates
    N = tk.n_train
    # every worker's batches drawn at once: its c-th batch of b is the c-th draw of b from its
    # stream (the same values as one draw per gradient: numpy's bounded integers are drawn
    # one after the other; the bit-for-bit tests hold it)
    start = np.zeros(s.grad_worker.size, dtype=np.int64)
    pool: dict[int, np.ndarray] = {}
    for w in np.unique(s.grad_worker).tolist():
        sel = np.flatnonzero(s.grad_worker == w)
        sel = sel[np.argsort(s.grad_step[sel], kind="stable")]
        sizes = s.grad_samples[sel]
        start[sel] = np.cumsum(sizes) - sizes
        pool[w] = batch_stream(seed, w).integers(0, N, int(sizes.sum()))
    # the last update that reads each version: a version is dropped after it
    last = np.full(U + 1, -1, dtype=np.int64)
    np.maximum.at(last, s.grad_read, s.grad_update)
    kept: dict[int, np.ndarray] = {0: p} if last[0] >= 0 else {}
    bounds = np.searchsorted(s.grad_update, np.arange(U + 1))
    eq = bool(s.grad_samples.size == 0 or np.all(s.grad_samples == s.grad_samples[0]))
    l0, a0 = _evaluate(tk, p)
    ev_u, ev_t, ev_n, ev_l, ev_a = [0], [0.0], [0], [l0], [a0]
    seen = 0
    cur = p
    for u in range(U):
        acc = None
        tot = 0
        for g in range(int(bounds[u]), int(bounds[u + 1])):
            w = int(s.grad_worker[g])
            b = int(s.grad_samples[g])
            a = int(start[g])
            idx = pool[w][a:a + b]
            x = tk.gradient(kept[int(s.grad_read[g])], idx)
            if not eq:
                x = x * b
            acc = x if acc is None else acc + x
            tot += b if not eq else 1
        seen += int(s.grad_samples[bounds[u]:bounds[u + 1]].sum())
        cur = tk.apply(cur, acc / tot, lr) if acc is not None else cur
        if last[u + 1] > u:  # a later gradient is computed on it
            kept[u + 1] = cur
        for v in {int(r) for r in s.grad_read[bounds[u]:bounds[u + 1]]}:
            if last[v] <= u:
                kept.pop(v, None)
        if (u + 1) % every == 0 or u + 1 == U:
            ev_u.append(u + 1)
            ev_t.append(float(s.update_time[u]))
            ev_n.append(seen)
            lo, ac = _evaluate(tk, cur)
            ev_l.append(lo)
            ev_a.append(ac)
    return Curve(np.asarray(ev_u), np.asarray(ev_t), np.asarray(ev_n), np.asarray(ev_l),
                 np.asarray(ev_a), cur)


def _cocod_sync(w: int, r: int, x: list, snap: dict, avg: dict, waiting: dict,
                at_round: dict, n: int) -> None:
    """Worker ``w`` at its synchronisation point ``r``: merge the average of round ``r - 1``
    (or wait for it: the worker takes no step until then, as its merge waits for that
    all-reduce in the net), snapshot, and when it is the last of round ``r``, average the
    snapshots and release the workers waiting for that average."""
    if r >= 1:
        if r - 1 not in avg:
            waiting.setdefault(r, []).append(w)
            return
        x[w] = avg[r - 1] + (x[w] - snap.pop((w, r - 1)))
    snap[w, r] = x[w].copy()
    at_round[r] = at_round.get(r, 0) + 1
    if at_round[r] == n:
        avg[r] = sum(snap[v, r] for v in range(n)) / n
        avg.pop(r - 2, None)
        for v in waiting.pop(r + 1, []):
            _cocod_sync(v, r + 1, x, snap, avg, waiting, at_round, n)


def _local(s: Schedule, tk, lr: float, seed: int, p: np.ndarray, every: int) -> Curve:
    """Local steps in time order; an averaging when the last worker ends its round; the
    workers' mean model evaluated every ``every`` local steps of all workers (``every=None``:
    every ``n``) and at every round."""
    n, N = s.workers, tk.n_train
    H = [int(h) for h in s.round_steps]
    x = [p.copy() for _ in range(n)]
    snap: dict[tuple[int, int], np.ndarray] = {}
    avg: dict[int, np.ndarray] = {}
    done = np.zeros(n, dtype=np.int64)  # local steps of each worker
    streams = [batch_stream(seed, w) for w in range(n)]
    R = s.round_time.size
    l0, a0 = _evaluate(tk, p)
    ev_u, ev_t, ev_n, ev_l, ev_a = [0], [0.0], [0], [l0], [a0]
    seen = 0
    at_round: dict[int, int] = {}  # round -> workers at its end
    waiting: dict[int, list[int]] = {}  # CoCoD: round -> workers waiting for its merge
    for j in range(s.step_time.size):
        w, b = int(s.step_worker[j]), int(s.step_samples[j])
        if done[w] >= R * H[w]:
            continue
        x[w] = tk.apply(x[w], tk.gradient(x[w], streams[w].integers(0, N, b)), lr)
        done[w] += 1
        seen += b
        rnd_end = done[w] % H[w] == 0
        if rnd_end:
            r = int(done[w] // H[w]) - 1
            if s.averaging == "cocod":
                _cocod_sync(w, r, x, snap, avg, waiting, at_round, n)
            else:
                at_round[r] = at_round.get(r, 0) + 1
                if at_round[r] == n:  # the last worker of round r: the averaging
                    m = sum(x) / n
                    x = [m.copy() for _ in range(n)]
        steps = int(done.sum())
        if steps % every == 0 or (rnd_end and at_round.get(r, 0) == n):
            lo, ac = _evaluate(tk, sum(x) / n)
            ev_u.append(steps)
            ev_t.append(float(s.step_time[j]) if not (rnd_end and at_round.get(r, 0) == n)
                        else max(float(s.step_time[j]), float(s.round_time[r])))
            ev_n.append(seen)
            ev_l.append(lo)
            ev_a.append(ac)
    final = sum(x) / n
    return Curve(np.asarray(ev_u), np.asarray(ev_t), np.asarray(ev_n), np.asarray(ev_l),
                 np.asarray(ev_a), final)
