"""Correct white-box adapters written the natural NumPy way, as a user would (issue 10): every
function takes the float64 parameters and works in whatever dtype NumPy promotes to (float64
features for float32 input). They are controls: the property suite must never fail them.
``KV_TARGET=tests.whitebox_adapters:targets`` runs the suite against them."""

from __future__ import annotations

import numpy as np

from kernel_verify.properties.protocol import FeatureMapTarget


def gaussian_draw(rng, d, m, config):
    return {"W": rng.standard_normal((m, d))}


def orthogonal_draw(rng, d, m, config):
    blocks = []
    for _ in range(-(-m // d)):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        blocks.append(q * np.sign(np.diag(r)))
    w = np.concatenate(blocks)[:m]
    return {"W": w * np.sqrt(rng.chisquare(d, size=m))[:, None]}


def _half_sq(x):
    return 0.5 * np.sum(x * x, axis=-1, keepdims=True)


def log_positive(x, p, c):
    return x @ p["W"].T - _half_sq(x) - 0.5 * np.log(len(p["W"]))


def positive(x, p, c):
    return np.exp(log_positive(x, p, c))


def log_hyperbolic(x, p, c):
    u = x @ p["W"].T
    return np.concatenate([u, -u], axis=-1) - _half_sq(x) - 0.5 * np.log(2 * len(p["W"]))


def hyperbolic(x, p, c):
    return np.exp(log_hyperbolic(x, p, c))


def trig(x, p, c):
    u = x @ p["W"].T
    return np.exp(_half_sq(x)) / np.sqrt(len(p["W"])) * np.concatenate([np.cos(u), np.sin(u)], -1)


def log_gerf(x, p, c):
    w, a = p["W"], c["A"]
    b, d = np.sqrt(1 - 4 * a), w.shape[1]
    row = a * np.sum(w * w, axis=-1) + 0.25 * d * np.log1p(-4 * a) - 0.5 * np.log(len(w))
    return b * (x @ w.T) + row - _half_sq(x)


def gerf(x, p, c):
    return np.exp(log_gerf(x, p, c))


def taylor2(x, p, c):
    d = x.shape[-1]
    z = x * d**-0.25
    quad = (z[..., :, None] * z[..., None, :]).reshape(*x.shape[:-1], d * d) / np.sqrt(2)
    return np.concatenate([np.ones((*x.shape[:-1], 1)), z, quad], axis=-1)


def taylor2_compressed(x, p, c):
    d = x.shape[-1]
    z = x * d**-0.25
    i, j = np.triu_indices(d, k=1)  # the formula's order: squares first, then pairs i < j
    return np.concatenate([np.ones((*x.shape[:-1], 1)), z, z * z / np.sqrt(2),
                           z[..., i] * z[..., j]], axis=-1)


def no_params(rng, d, m, config):
    return {}


SOFTMAX = frozenset({"unbiased", "positive", "gaussian_rows", "log_features", "psd_kernel"})
TAYLOR = frozenset({"deterministic", "exact_finite", "psd_kernel"})

targets = [
    FeatureMapTarget("user_positive", "softmax", SOFTMAX, formula="softmax_positive",
                     draw=gaussian_draw, numpy_fn=positive, log_numpy_fn=log_positive,
                     attention_prescale=True),
    FeatureMapTarget("user_hyperbolic", "softmax", SOFTMAX, formula="softmax_hyperbolic",
                     draw=gaussian_draw, numpy_fn=hyperbolic, log_numpy_fn=log_hyperbolic,
                     attention_prescale=True),
    FeatureMapTarget("user_trig", "softmax", frozenset({"unbiased", "gaussian_rows",
                                                        "psd_kernel"}),
                     formula="softmax_trig", draw=gaussian_draw, numpy_fn=trig,
                     attention_prescale=True),
    FeatureMapTarget("user_orthogonal_positive", "softmax", SOFTMAX | {"orthogonal"},
                     formula="softmax_positive", matrix="orthogonal", draw=orthogonal_draw,
                     numpy_fn=positive, log_numpy_fn=log_positive, attention_prescale=True),
    FeatureMapTarget("user_gerf", "softmax", SOFTMAX, formula="gerf", config={"A": -0.1},
                     draw=gaussian_draw, numpy_fn=gerf, log_numpy_fn=log_gerf,
                     attention_prescale=True),
    FeatureMapTarget("user_taylor2", "taylor", TAYLOR, kernel_params={"order": 2},
                     formula="taylor", config={"order": 2}, draw=no_params, numpy_fn=taylor2),
    FeatureMapTarget("user_taylor2_compressed", "taylor", TAYLOR, kernel_params={"order": 2},
                     formula="taylor2_compressed", draw=no_params, numpy_fn=taylor2_compressed),
]

#: Variants a user may write: no attention pre-scaling declared, no log functions (plain path).
variants = [
    FeatureMapTarget("user_positive_plain", "softmax", SOFTMAX - {"log_features"},
                     formula="softmax_positive", draw=gaussian_draw, numpy_fn=positive,
                     attention_prescale=True),
    FeatureMapTarget("user_positive_unscaled", "softmax", SOFTMAX, formula="softmax_positive",
                     draw=gaussian_draw, numpy_fn=positive, log_numpy_fn=log_positive),
    FeatureMapTarget("user_hyperbolic_plain_unscaled", "softmax", SOFTMAX - {"log_features"},
                     formula="softmax_hyperbolic", draw=gaussian_draw, numpy_fn=hyperbolic),
    FeatureMapTarget("user_gerf_unscaled", "softmax", SOFTMAX, formula="gerf",
                     config={"A": -0.1}, draw=gaussian_draw, numpy_fn=gerf,
                     log_numpy_fn=log_gerf),
]
