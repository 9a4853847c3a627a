"""The narrow-basin functions of hypertune's benchmark suite (testing/test_functions.h)
for the Python peers: hartmann3, shekel5/7/10, camel2, with the same bounds and minima.

  extra_peer.py (beside this file) runs ../shared/peers/optuna_peer.py with these added.
"""
import numpy as np

_A3 = np.array([[3, 10, 30], [0.1, 10, 35], [3, 10, 30], [0.1, 10, 35]])
_P3 = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470],
                       [1091, 8732, 5547], [381, 5743, 8828]])
_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_BETA = 0.1 * np.array([1, 2, 2, 4, 4, 6, 3, 7, 5, 5])
_C = np.array([[4, 1, 8, 6, 3, 2, 5, 8, 6, 7],
               [4, 1, 8, 6, 7, 9, 3, 1, 2, 3.6],
               [4, 1, 8, 6, 3, 2, 5, 8, 6, 7],
               [4, 1, 8, 6, 7, 9, 3, 1, 2, 3.6]])


def hartmann3(x):
    x = np.asarray(x, dtype=float)
    return -float(np.sum(_ALPHA * np.exp(-np.sum(_A3 * (x - _P3) ** 2, axis=1))))


def shekel(m):
    def f(x):
        x = np.asarray(x, dtype=float)
        return -float(np.sum(1.0 / (np.sum((x[:, None] - _C[:, :m]) ** 2, axis=0) + _BETA[:m])))
    return f


def camel(x):
    a, b = float(x[0]), float(x[1])
    return (4 - 2.1 * a * a + a ** 4 / 3) * a * a + a * b + (-4 + 4 * b * b) * b * b


# name -> (function, bounds, known minimum), as peers/functions.py's FUNCTIONS.
EXTRA_FUNCTIONS = {
    "hartmann3": (hartmann3, [(0.0, 1.0)] * 3, -3.86277978733266),
    "shekel5": (shekel(5), [(0.0, 10.0)] * 4, -10.1531996790582),
    "shekel7": (shekel(7), [(0.0, 10.0)] * 4, -10.4029153367777),
    "shekel10": (shekel(10), [(0.0, 10.0)] * 4, -10.5364431534835),
    "camel2": (camel, [(-3.0, 3.0), (-2.0, 2.0)], -1.03162845348988),
}
