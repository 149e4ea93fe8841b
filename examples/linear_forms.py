"""Linear attention with elu+1 features in every form the suite checks (README "The forms
protocol"): ``kernel-verify check kernel_verify.examples.linear_forms:targets``."""
from itertools import pairwise

import numpy as np

from kernel_verify import AttentionTarget


def phi(x):  # φ(x) = elu(x) + 1 > 0, m = d features
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))

def phi_q(x):  # φ(q) times 2^-e, e the exponent of its largest feature: exact, cancels in num/den,
    f = phi(x)  # and keeps φ(q)ᵀφ(k) = e^(q+k) from underflowing to 0/0 at |q|, |k| ≈ 600
    return np.ldexp(f, -np.frexp(f.max(axis=-1, keepdims=True))[1])

def run(q, k, v, state, keep=None):  # the causal recurrence from `state`; keep: (B, T) mask
    B, H, _, d = q.shape
    S, z = state if state is not None else (np.zeros((B, H, d, v.shape[-1])), np.zeros((B, H, d)))
    fk = phi(k) if keep is None else phi(k) * keep[:, None, :, None]   # padded keys add nothing
    S = S[:, :, None] + np.cumsum(fk[..., :, None] * v[..., None, :], axis=2)  # S_t (B,H,T,m,dv)
    z = z[:, :, None] + np.cumsum(fk, axis=2)                                  # z_t (B,H,T,m)
    num, den = np.einsum("bhtm,bhtmv->bhtv", phi_q(q), S), np.einsum("bhtm,bhtm->bht", phi_q(q), z)
    return num / np.where(den > 0, den, 1.0)[..., None], (S[:, :, -1], z[:, :, -1])

def attention(q, k, v, *, causal, seed=0):  # the plain call (noncausal: every key, one sum)
    if causal:
        return run(q, k, v, None)[0]
    S, z = np.einsum("bhjm,bhjv->bhmv", phi(k), v), phi(k).sum(axis=2)
    den = np.einsum("bhtm,bhm->bht", phi_q(q), z)
    return np.einsum("bhtm,bhmv->bhtv", phi_q(q), S) / den[..., None]

def stateful(q, k, v, *, initial_state=None, seed=0):       # -> (out, final_state)
    return run(q, k, v, initial_state)

def chunked(q, k, v, *, chunk_size, initial_state=None, seed=0):  # -> (out, final_state)
    state, outs = initial_state, []
    for s in range(0, q.shape[2], chunk_size):
        out, state = run(q[:, :, s:s + chunk_size], k[:, :, s:s + chunk_size],
                         v[:, :, s:s + chunk_size], state)
        outs.append(out)
    return np.concatenate(outs, axis=2), state

def step(state, q_t, k_t, v_t, *, seed=0):                 # -> (state, o_t); no time axis
    out, state = run(q_t[:, :, None], k_t[:, :, None], v_t[:, :, None], state)
    return state, out[:, :, 0]

def varlen(q, k, v, *, cu_seqlens, initial_state=None, seed=0):  # batch 1, N packed sequences
    cu, outs, finals = [int(c) for c in cu_seqlens], [], []
    for i, (a, b) in enumerate(pairwise(cu)):
        init = None if initial_state is None else tuple(s[i:i + 1] for s in initial_state)
        out, state = run(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], init)
        outs.append(out)
        finals.append(state)
    return np.concatenate(outs, axis=2), tuple(np.concatenate(s) for s in zip(*finals, strict=True))

def padded(q, k, v, *, mask, initial_state=None, seed=0):  # mask (B, T), True where valid
    return run(q, k, v, initial_state, keep=np.asarray(mask, dtype=np.float64))

targets = [AttentionTarget(
    "elu_linear", attention, frozenset({"causal", "noncausal", "positive_weights"}),
    stateful=stateful, chunked=chunked, step=step, varlen=varlen, padded=padded,
    features=lambda x, seed: phi(np.asarray(x, dtype=np.float64)),   # white-box: φ(x) (B,H,T,m)
    state_sums=lambda state: (state[0], state[1]))]                  # (S, z) of a state
