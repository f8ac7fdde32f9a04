"""The three LaRA geometry metrics (SPEC §3), every layer in one vectorised pass.

Per question and layer ℓ, with u_i = h_ℓ(q_i), w_i = h_ℓ(q_i⁻) and φ_{i,m} = h_ℓ(v_{i,m})
(i = 0 the original, i = 1…K the similar questions, m = 1…M the paraphrases):

* Δ_i = u_i − w_i, S_i = ‖Δ_i‖₂ (the shift caused by blanking the key information);
* zRSM = (S_0 − mean S_1..K) / (std S_1..K + ε), std with ddof 1, over the similars only;
* DC = Δ_0·s̄ / ((‖Δ_0‖ + ε)(‖s̄‖ + ε)), s̄ = mean Δ_1..K;
* R_i = mean_m ‖φ_{i,m} − φ̄_i‖₂, φ̄_i = mean_m φ_{i,m} (the spread of the paraphrases);
* zRSI = (R_0 − mean R_1..K) / (std R_1..K + ε).

All arithmetic is float64. :func:`metrics` is the plain public function; :func:`batch_metrics`
does N questions at once and accepts masks for members or paraphrases that generation could not
produce.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METRIC_NAMES: tuple[str, ...] = ("zRSM", "DC", "zRSI")
DEFAULT_EPS = 1e-8


@dataclass(frozen=True)
class BatchMetrics:
    """Metrics of N questions.

    Attributes:
        metrics: ``[N, 3, L]`` rows zRSM, DC, zRSI (NaN for questions that cannot be scored).
        S: ``[N, K+1, L]`` blanking shifts ‖u_i − w_i‖ (NaN for members left out).
        R: ``[N, K+1, L]`` paraphrase spreads (NaN for members left out).
        n_similars: ``[N]`` similar questions used.
    """

    metrics: np.ndarray
    S: np.ndarray
    R: np.ndarray
    n_similars: np.ndarray


def metrics(u: np.ndarray, w: np.ndarray, phi: np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """zRSM, DC and zRSI of one question at every layer.

    Args:
        u: ``[K+1, L, d]`` pooled activations of q_0 (the original) … q_K.
        w: ``[K+1, L, d]`` pooled activations of the blanked variants q_0⁻ … q_K⁻.
        phi: ``[K+1, M, L, d]`` pooled activations of the paraphrases v_{i,m} of q_i⁻.
        eps: numerical floor of the denominators.

    Returns:
        ``[3, L]`` float64, rows zRSM, DC, zRSI.
    """
    u, w, phi = (np.array(x, dtype=np.float64) for x in (u, w, phi))  # copies: the pass works in place
    if u.ndim != 3 or u.shape != w.shape:
        raise ValueError(f"u and w must both be [K+1, L, d]; got {u.shape} and {w.shape}")
    if phi.ndim != 4 or phi.shape[0] != u.shape[0] or phi.shape[2:] != u.shape[1:]:
        raise ValueError(f"phi must be [K+1, M, L, d] = [{u.shape[0]}, M, {u.shape[1]}, {u.shape[2]}]; got {phi.shape}")
    if u.shape[0] < 3:
        raise ValueError(
            f"K >= 2 similar questions are needed (a standard deviation is taken over them); got K = {u.shape[0] - 1}"
        )
    if phi.shape[1] < 1:
        raise ValueError("phi holds no paraphrases (M = 0)")
    return batch_metrics(u[None], w[None], phi[None], eps=eps, overwrite=True).metrics[0]


def batch_metrics(
    u: np.ndarray,
    w: np.ndarray,
    phi: np.ndarray,
    member_ok: np.ndarray | None = None,
    paraphrase_ok: np.ndarray | None = None,
    eps: float = DEFAULT_EPS,
    overwrite: bool = False,
) -> BatchMetrics:
    """Metrics of N questions at once.

    Args:
        u, w: ``[N, K+1, L, d]`` float64.
        phi: ``[N, K+1, M, L, d]`` float64.
        member_ok: ``[N, K+1]`` bool, members to use (default all). A question whose original
            (member 0) is not usable, or with fewer than 2 usable similars, gets NaN metrics.
        paraphrase_ok: ``[N, K+1, M]`` bool, paraphrases to use (default all); a usable member
            needs at least one.
        eps: numerical floor.
        overwrite: work in ``u`` and ``phi`` themselves (float64 arrays the caller owns and
            will not read again) instead of float64 copies: the batched pass of a metrics file.

    Rows of missing members or paraphrases may hold anything finite (zeros, typically): they
    are masked out, never averaged in.
    """
    if not overwrite:
        u, phi = np.array(u, dtype=np.float64), np.array(phi, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, k1, m = phi.shape[:3]
    member_ok = np.ones((n, k1), dtype=bool) if member_ok is None else np.asarray(member_ok, dtype=bool)
    paraphrase_ok = np.ones((n, k1, m), dtype=bool) if paraphrase_ok is None else np.asarray(paraphrase_ok, dtype=bool)
    paraphrase_ok = paraphrase_ok & member_ok[:, :, None]
    n_para = paraphrase_ok.sum(axis=2)  # [N, K+1]
    member_ok = member_ok & (n_para > 0)

    delta = np.subtract(u, w, out=u)  # [N, K+1, L, d]; u is not needed again
    S = _norm(delta)  # [N, K+1, L]
    sim_ok = member_ok[:, 1:]  # [N, K]
    n_sim = sim_ok.sum(axis=1)  # [N]
    zrsm = _standardised_gap(S, sim_ok, n_sim, eps)

    weights = sim_ok / np.maximum(n_sim, 1)[:, None]  # [N, K]
    s_bar = np.einsum("nk,nkld->nld", weights, delta[:, 1:])  # [N, L, d]
    d0 = delta[:, 0]
    dc = np.einsum("nld,nld->nl", d0, s_bar) / ((S[:, 0] + eps) * (_norm(s_bar) + eps))

    # Centre on each member's first usable paraphrase before averaging: the same numbers in exact
    # arithmetic, but identical paraphrases then give a spread of exactly 0.
    first = np.argmax(paraphrase_ok, axis=2)  # [N, K+1]
    anchor = phi[np.arange(n)[:, None], np.arange(k1)[None, :], first]  # [N, K+1, L, d]
    np.subtract(phi, anchor[:, :, None], out=phi)
    del anchor
    para_w = paraphrase_ok / np.maximum(n_para, 1)[:, :, None]  # [N, K+1, M]
    phi_bar = np.einsum("nkm,nkmld->nkld", para_w, phi)  # [N, K+1, L, d]
    spread = _norm(np.subtract(phi, phi_bar[:, :, None], out=phi))  # [N, K+1, M, L]
    R = np.einsum("nkm,nkml->nkl", para_w, spread)  # [N, K+1, L]
    zrsi = _standardised_gap(R, sim_ok, n_sim, eps)

    out = np.stack([zrsm, dc, zrsi], axis=1)  # [N, 3, L]
    unscorable = ~member_ok[:, 0] | (n_sim < 2)
    out[unscorable] = np.nan
    S[~member_ok] = np.nan
    R[~member_ok] = np.nan
    return BatchMetrics(metrics=out, S=S, R=R, n_similars=n_sim)


def _standardised_gap(values: np.ndarray, sim_ok: np.ndarray, n_sim: np.ndarray, eps: float) -> np.ndarray:
    """(v_0 − mean v_1..K) / (std v_1..K + ε) over the usable similars; ``values`` [N, K+1, L]."""
    sims = np.where(sim_ok[:, :, None], values[:, 1:], 0.0)  # [N, K, L]
    count = np.maximum(n_sim, 1)[:, None]  # [N, 1]
    mean = sims.sum(axis=1) / count  # [N, L]
    sq = np.where(sim_ok[:, :, None], (values[:, 1:] - mean[:, None]) ** 2, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.sqrt(sq.sum(axis=1) / np.maximum(n_sim - 1, 1)[:, None])
    return (values[:, 0] - mean) / (std + eps)


def _norm(x: np.ndarray) -> np.ndarray:
    """Euclidean norm over the last axis without a squared temporary of x's size."""
    return np.sqrt(np.einsum("...d,...d->...", x, x))
