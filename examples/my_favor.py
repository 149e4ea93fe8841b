"""A complete third-party adapter (FAVOR+): ``kernel-verify check examples.my_favor:targets``."""
import numpy as np
from scipy.special import logsumexp, softmax

from kernel_verify import AttentionTarget, FeatureMapTarget


def draw(rng, d, m, config):  # exposing the random parameters makes the map white-box
    return {"W": rng.standard_normal((m, d))}

def log_favor(x, p, config):  # log φ(x) = Wx − ‖x‖²/2 − ½ log m
    return x @ p["W"].T - 0.5 * np.sum(x * x, axis=-1, keepdims=True) - 0.5 * np.log(len(p["W"]))

def attention(q, k, v, *, causal, seed, m=64):  # black-box: only outputs are visible
    if not all(np.isfinite(a).all() for a in (q, k, v)):
        raise ValueError("q, k and v must be finite")
    p, s = draw(np.random.default_rng(seed), q.shape[-1], m, {}), q.shape[-1] ** -0.25
    logits = logsumexp(log_favor(q * s, p, {})[..., :, None, :]  # log φ(qᵢ)ᵀφ(kⱼ)
                       + log_favor(k * s, p, {})[..., None, :, :], axis=-1)
    mask = np.tri(logits.shape[-1], dtype=bool) if causal else True
    return softmax(np.where(mask, logits, -np.inf), axis=-1) @ v

claims = frozenset({"unbiased", "positive", "log_features"})
targets = [FeatureMapTarget("my_favor", "softmax", claims, formula="softmax_positive", draw=draw,
                            numpy_fn=lambda x, p, c: np.exp(log_favor(x, p, c)),
                            log_numpy_fn=log_favor, attention_prescale=True),
           AttentionTarget("my_favor_attention", attention, frozenset(
               {"causal", "noncausal", "positive_weights", "approximates_softmax"}))]
