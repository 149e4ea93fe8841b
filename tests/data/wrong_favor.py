"""A deliberately wrong FAVOR+ adapter for the packaging test: log φ divides by m, not √m
(``− log m`` where ``− ½ log m`` belongs), so φ(x)ᵀφ(y) estimates exp(xᵀy)/m."""
import numpy as np

from kernel_verify.properties.protocol import FeatureMapTarget


def draw(rng, d, m, config):
    return {"W": rng.standard_normal((m, d))}


def log_favor(x, p, config):
    return x @ p["W"].T - 0.5 * np.sum(x * x, axis=-1, keepdims=True) - np.log(len(p["W"]))


targets = [FeatureMapTarget("wrong_favor", "softmax", frozenset({"unbiased", "positive",
                                                                   "log_features"}),
                            formula="softmax_positive", draw=draw,
                            numpy_fn=lambda x, p, c: np.exp(log_favor(x, p, c)),
                            log_numpy_fn=log_favor, attention_prescale=True)]
