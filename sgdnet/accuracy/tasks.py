"""Training tasks a schedule is replayed on: numpy only, a few thousand updates in seconds.

A task is any object with the :class:`Task` interface: ``init()``, ``gradient(params, idx)``
(the mean gradient over the training samples ``idx``), ``apply(params, grad, lr)`` (a new
parameter array, the old one untouched, as stale gradients need old versions), ``loss(params)``
and ``accuracy(params)`` on a held-out set, and ``n_train``. Parameters are flat float arrays
(local SGD averages them).

Built-in tasks (:func:`get_task`)
---------------------------------
``logreg``
    Logistic regression on a synthetic teacher-student task: ``x ~ N(0, I_32)``, labels drawn
    ``y ~ Bernoulli(sigmoid(w* . x))`` from a fixed random teacher ``w*`` of norm 4 (so the
    Bayes error is not 0 and a loss target is reached gradually), 8,192 training and 2,048
    held-out samples, seed 0; the student starts from zero.
``mlp``
    A one-hidden-layer tanh MLP (32 units, softmax over 4 classes) on a teacher-student task:
    ``x ~ N(0, I_16)``, labels the argmax of a random teacher MLP's logits (16-64-4, tanh)
    plus Gumbel noise of scale 0.5 (label noise), 8,192 / 2,048 samples, seed 0; student
    weights start ``N(0, 1/fan_in)``.
``digits``
    Softmax regression on scikit-learn's 8x8 digits (1,797 images, standardised; 1,437 train /
    360 held-out, seed 0), only when scikit-learn is importable (not a dependency).

Batches: worker ``w``'s ``c``-th gradient sums ``b`` training indices, the ``c``-th draw
``rng.integers(0, n_train, b)`` of the stream ``numpy.random.default_rng([seed, w])``
(:func:`batch_stream`), so a gradient's batch depends on its worker and index only, never on
the interleaving of the workers.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import UnknownNameError

__all__ = ["Task", "LogisticTask", "MLPTask", "get_task", "task_names", "batch_stream",
           "teacher_student_logistic", "teacher_student_mlp"]


@runtime_checkable
class Task(Protocol):
    """What a replay needs of a task (see the module docstring)."""

    name: str
    n_train: int

    def init(self) -> np.ndarray: ...

    def gradient(self, params: np.ndarray, idx: np.ndarray) -> np.ndarray: ...

    def apply(self, params: np.ndarray, grad: np.ndarray, lr: float) -> np.ndarray: ...

    def loss(self, params: np.ndarray) -> float: ...

    def accuracy(self, params: np.ndarray) -> float: ...


def batch_stream(seed: int, worker: int) -> np.random.Generator:
    """The sample stream of ``worker``: its ``c``-th batch of ``b`` is the ``c``-th
    ``integers(0, n_train, b)`` draw."""
    return np.random.default_rng([int(seed), int(worker)])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # stable for large |z|


class LogisticTask:
    """Binary logistic regression (weights and bias), mean cross-entropy.

    Parameters
    ----------
    X, y : numpy.ndarray
        Training features ``(N, d)`` and labels in {0, 1}.
    X_eval, y_eval : numpy.ndarray
        Held-out set for :meth:`loss` / :meth:`accuracy`.
    name : str
    l2 : float
        L2 penalty on the weights (not the bias) in the loss and gradient.
    """

    def __init__(self, X, y, X_eval, y_eval, name: str = "logreg", l2: float = 0.0):
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y = np.asarray(y, dtype=float)
        self.Xe = np.ascontiguousarray(X_eval, dtype=float)
        self.ye = np.asarray(y_eval, dtype=float)
        self.name = name
        self.l2 = float(l2)
        self.n_train = int(self.X.shape[0])
        self.dim = int(self.X.shape[1]) + 1

    def init(self) -> np.ndarray:
        return np.zeros(self.dim)

    def gradient(self, params: np.ndarray, idx: np.ndarray) -> np.ndarray:
        X = self.X[idx]
        r = _sigmoid(X @ params[:-1] + params[-1]) - self.y[idx]
        g = np.empty(self.dim)
        g[:-1] = X.T @ r / len(idx) + self.l2 * params[:-1]
        g[-1] = r.mean()
        return g

    def apply(self, params: np.ndarray, grad: np.ndarray, lr: float) -> np.ndarray:
        return params - lr * grad

    def _z(self, params: np.ndarray) -> np.ndarray:
        return self.Xe @ params[:-1] + params[-1]

    def loss(self, params: np.ndarray) -> float:
        z = self._z(params)
        # log(1 + e^z) - y z, computed stably
        ce = np.logaddexp(0.0, z) - self.ye * z
        return float(ce.mean() + 0.5 * self.l2 * params[:-1] @ params[:-1])

    def accuracy(self, params: np.ndarray) -> float:
        return float(np.mean((self._z(params) > 0) == (self.ye > 0.5)))

    def evaluate(self, params: np.ndarray) -> tuple[float, float]:
        """``(loss, accuracy)`` from one product with the held-out set."""
        z = self._z(params)
        ce = np.logaddexp(0.0, z) - self.ye * z
        return (float(ce.mean() + 0.5 * self.l2 * params[:-1] @ params[:-1]),
                float(np.mean((z > 0) == (self.ye > 0.5))))


class MLPTask:
    """One hidden tanh layer, softmax cross-entropy; parameters packed in one flat array.

    Parameters
    ----------
    X, y, X_eval, y_eval : numpy.ndarray
        Features ``(N, d)`` and integer labels ``0..classes-1``.
    hidden : int
    seed : int
        Seed of the initial weights.
    name : str
    """

    def __init__(self, X, y, X_eval, y_eval, hidden: int = 32, seed: int = 0, name: str = "mlp"):
        self.X = np.ascontiguousarray(X, dtype=float)
        self.y = np.asarray(y, dtype=np.int64)
        self.Xe = np.ascontiguousarray(X_eval, dtype=float)
        self.ye = np.asarray(y_eval, dtype=np.int64)
        self.name = name
        self.n_train = int(self.X.shape[0])
        self.d, self.h = int(self.X.shape[1]), int(hidden)
        self.k = int(max(self.y.max(), self.ye.max()) + 1)
        self.seed = int(seed)
        d, h, k = self.d, self.h, self.k
        self._shapes = [(d, h), (h,), (h, k), (k,)]
        self._cuts = np.cumsum([0] + [int(np.prod(s)) for s in self._shapes])

    def _unpack(self, p: np.ndarray) -> list[np.ndarray]:
        return [p[a:b].reshape(s) for a, b, s in zip(self._cuts[:-1], self._cuts[1:],
                                                      self._shapes)]

    def init(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        W1 = rng.normal(0, 1 / np.sqrt(self.d), (self.d, self.h))
        W2 = rng.normal(0, 1 / np.sqrt(self.h), (self.h, self.k))
        return np.concatenate([W1.ravel(), np.zeros(self.h), W2.ravel(), np.zeros(self.k)])

    def _forward(self, p: np.ndarray, X: np.ndarray):
        W1, b1, W2, b2 = self._unpack(p)
        H = np.tanh(X @ W1 + b1)
        Z = H @ W2 + b2
        return H, Z - Z.max(axis=1, keepdims=True)

    def gradient(self, params: np.ndarray, idx: np.ndarray) -> np.ndarray:
        X, y = self.X[idx], self.y[idx]
        W1, b1, W2, b2 = self._unpack(params)
        H, Z = self._forward(params, X)
        P = np.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        P[np.arange(len(idx)), y] -= 1.0
        P /= len(idx)
        gW2 = H.T @ P
        gb2 = P.sum(axis=0)
        dH = (P @ W2.T) * (1.0 - H * H)
        gW1 = X.T @ dH
        gb1 = dH.sum(axis=0)
        return np.concatenate([gW1.ravel(), gb1, gW2.ravel(), gb2])

    def apply(self, params: np.ndarray, grad: np.ndarray, lr: float) -> np.ndarray:
        return params - lr * grad

    def loss(self, params: np.ndarray) -> float:
        _, Z = self._forward(params, self.Xe)
        lse = np.log(np.exp(Z).sum(axis=1))
        return float(np.mean(lse - Z[np.arange(Z.shape[0]), self.ye]))

    def accuracy(self, params: np.ndarray) -> float:
        _, Z = self._forward(params, self.Xe)
        return float(np.mean(Z.argmax(axis=1) == self.ye))

    def evaluate(self, params: np.ndarray) -> tuple[float, float]:
        """``(loss, accuracy)`` from one forward pass over the held-out set."""
        _, Z = self._forward(params, self.Xe)
        lse = np.log(np.exp(Z).sum(axis=1))
        return (float(np.mean(lse - Z[np.arange(Z.shape[0]), self.ye])),
                float(np.mean(Z.argmax(axis=1) == self.ye)))


def teacher_student_logistic(d: int = 32, n_train: int = 8192, n_eval: int = 2048,
                             norm: float = 4.0, seed: int = 0) -> LogisticTask:
    """The ``logreg`` task (see the module docstring)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w *= norm / np.linalg.norm(w)
    X = rng.normal(size=(n_train + n_eval, d))
    y = (rng.random(n_train + n_eval) < _sigmoid(X @ w)).astype(float)
    return LogisticTask(X[:n_train], y[:n_train], X[n_train:], y[n_train:], name="logreg")


def teacher_student_mlp(d: int = 16, classes: int = 4, n_train: int = 8192, n_eval: int = 2048,
                        hidden: int = 32, noise: float = 0.5, seed: int = 0) -> MLPTask:
    """The ``mlp`` task (see the module docstring)."""
    rng = np.random.default_rng(seed)
    W1 = rng.normal(0, 1 / np.sqrt(d), (d, 64))
    W2 = rng.normal(0, 3 / np.sqrt(64), (64, classes))
    X = rng.normal(size=(n_train + n_eval, d))
    Z = np.tanh(X @ W1) @ W2 + noise * rng.gumbel(size=(n_train + n_eval, classes))
    y = Z.argmax(axis=1)
    return MLPTask(X[:n_train], y[:n_train], X[n_train:], y[n_train:], hidden=hidden,
                   seed=seed + 1, name="mlp")


class _Softmax(MLPTask):
    """Softmax regression as an MLP without its hidden layer (digits)."""

    def __init__(self, X, y, X_eval, y_eval, name: str = "digits"):
        super().__init__(X, y, X_eval, y_eval, hidden=1, name=name)
        d, k = self.d, self.k
        self._shapes = [(d, k), (k,)]
        self._cuts = np.cumsum([0, d * k, k])

    def init(self) -> np.ndarray:
        return np.zeros(int(self._cuts[-1]))

    def _forward(self, p: np.ndarray, X: np.ndarray):
        W, b = self._unpack(p)
        Z = X @ W + b
        return X, Z - Z.max(axis=1, keepdims=True)

    def gradient(self, params: np.ndarray, idx: np.ndarray) -> np.ndarray:
        X, y = self.X[idx], self.y[idx]
        _, Z = self._forward(params, X)
        P = np.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        P[np.arange(len(idx)), y] -= 1.0
        P /= len(idx)
        return np.concatenate([(X.T @ P).ravel(), P.sum(axis=0)])


def _digits() -> MLPTask:
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # pragma: no cover - depends on the environment
        raise UnknownNameError("task 'digits' needs scikit-learn (pip install scikit-learn); "
                               "use task='logreg' or 'mlp'") from None
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    o = rng.permutation(len(y))
    X, y = X[o], y[o]
    X = (X - X.mean(axis=0)) / (X.std(axis=0) + 1e-9)
    cut = len(y) - 360
    return _Softmax(X[:cut], y[:cut], X[cut:], y[cut:])


_BUILTIN = {"logreg": teacher_student_logistic, "mlp": teacher_student_mlp, "digits": _digits}
_CACHE: dict[str, Any] = {}


def task_names() -> list[str]:
    """Built-in task names (``digits`` only when scikit-learn is importable)."""
    try:
        import sklearn  # noqa: F401
        have = True
    except ImportError:
        have = False
    return [n for n in _BUILTIN if n != "digits" or have]


def get_task(task: Any) -> Any:
    """A built-in task by name (built once per process), or ``task`` itself when it has the
    :class:`Task` interface.

    Raises
    ------
    UnknownNameError
        Unknown name, or an object lacking a method of the interface.
    """
    if isinstance(task, str):
        if task not in _BUILTIN:
            raise UnknownNameError(f"task {task!r} is unknown; built-in tasks: {task_names()}, "
                                   "or pass an object with init/gradient/apply/loss/accuracy")
        if task not in _CACHE:
            _CACHE[task] = _BUILTIN[task]()
        return _CACHE[task]
    missing = [m for m in ("init", "gradient", "apply", "loss", "accuracy", "n_train")
               if not hasattr(task, m)]
    if missing:
        raise UnknownNameError(f"task {task!r} lacks {missing}; a task needs init(), "
                               "gradient(params, idx), apply(params, grad, lr), loss(params), "
                               "accuracy(params) and n_train")
    return task
