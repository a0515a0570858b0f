"""Looking inside a trained model: what its encoder attention actually sees and does.

The EIE derivation (Section 4 and appendix A.3 of the paper) models the input X of each multi-head
attention as standard normal, so that q and k are Gaussian and the expected row entropy is Eq. 6.
These probes measure, on a trained model and real instances:

- `probe_encoder`: for every encoder layer, the input X of its attention, the entropy of every
  attention row and the spread of that row's scaled logits lambda q.k_j over the keys;
- `js_divergence_to_normal`: per element (feature) of X, the Jensen-Shannon divergence between its
  empirical distribution and N(0, 1) (the paper's Figure 6), with the floor a true normal sample of
  the same size reaches under the same binning;
- `gaussian_row_entropy`: the entropy a row would have if its logits were i.i.d. normal with the
  measured spread (separates "the logits are Gaussian" from "q and k are standard normal");
- `measured_entropy`: the three above, per layer, method and n: the measured row entropy against
  Eq. 6 for the method's lambda(n) and against Gaussian logits with the measured spread;
- `permutation_check`: Theorem 1 on a trained model (permuting the nodes permutes the encoder
  output and the first-step probabilities, and leaves the greedy cost unchanged), with each
  problem's own node permutation (`Problem.permute`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy import stats

from .entropy import entropy_eq6, softmax_entropy
from .evaluation import extrapolation_lengths, fixed_test_set, greedy_costs, method_applied
from .methods import BoundMethod
from .model import AttentionModel


@dataclass
class EncoderProbe:
    """Per encoder layer (lists of length `layers`)."""

    inputs: list  # X entering the attention, (B, n, D)
    entropies: list  # entropy (nats) of each attention row, (B, H, n)
    logit_spread: list  # standard deviation over the keys of each row's scaled logits, (B, H, n)


@torch.no_grad()
def probe_encoder(model: AttentionModel, instance: dict, method: BoundMethod | None = None) -> EncoderProbe:
    """Run the encoder on `instance` with `method` applied (None: the model's own attention) and
    record each layer; the logits are the attention seam's own (`Attention.logits`)."""
    model.eval()
    inputs, entropies, spreads = [], [], []
    with method_applied(model, method):
        x = model.embed(instance)
        for i, layer in enumerate(model.encoder):
            ctx = model.encoder_context(instance, i, x.shape[0], x.device)
            q, k, _ = layer.attention.heads_of(x)
            logits = model.attention.logits(q, k, ctx)  # (B, H, n, n)
            inputs.append(x.cpu())
            entropies.append(softmax_entropy(logits).cpu())
            spreads.append(logits.std(dim=-1).cpu())
            x = layer(x, model.attention, ctx)
    return EncoderProbe(inputs, entropies, spreads)


def _js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats) between histograms p (..., bins) and q (bins,)."""
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log(p / m), 0.0).sum(-1)
        kl_q = np.where(q > 0, q * np.log(q / m), 0.0).sum(-1)
    return (kl_p + kl_q) / 2


def js_divergence_to_normal(samples: np.ndarray, edges: np.ndarray | None = None, seed: int = 0):
    """Jensen-Shannon divergence (nats) between each column of `samples` (m, k) and N(0, 1).

    Both are binned on `edges` (default: 80 bins over [-4, 4]) plus one bin for each tail. Returns
    (divergence per column (k,), floor): `floor` is the divergence of m draws from N(0, 1) itself,
    what a finite sample scores even when the model holds exactly.
    """
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 2 or samples.shape[0] < 2:
        raise ValueError(f"samples must be (m >= 2, k), got shape {samples.shape}")
    edges = np.linspace(-4, 4, 81) if edges is None else np.asarray(edges, dtype=np.float64)
    full = np.concatenate([[-np.inf], edges, [np.inf]])
    normal = np.diff(stats.norm.cdf(full))

    def histograms(values):
        bins = len(full) - 1
        index = np.searchsorted(edges, values, side="right")  # 0 .. len(edges): bin of each value
        index = index + bins * np.arange(values.shape[1])  # one block of bins per column: one bincount
        return np.bincount(index.ravel(), minlength=bins * values.shape[1]).reshape(values.shape[1], bins) / values.shape[0]

    divergence = _js_divergence(histograms(samples), normal)
    reference = np.random.default_rng(seed).standard_normal((samples.shape[0], 1))
    return divergence, float(_js_divergence(histograms(reference), normal)[0])


def gaussian_row_entropy(n: int, spread: torch.Tensor, seed: int = 0) -> float:
    """Mean entropy of softmax over n i.i.d. N(0, s^2) logits, one row per entry s of `spread`
    (one Monte-Carlo row each: an unbiased estimate of the mean over rows)."""
    spread = spread.reshape(-1).double()
    generator = torch.Generator().manual_seed(seed)
    total, rows = 0.0, 0
    for part in spread.split(max(1, (1 << 22) // n)):  # bound memory at ~32 MB
        z = torch.randn(part.shape[0], n, generator=generator, dtype=torch.float64)
        total += float(softmax_entropy(part[:, None] * z).sum())
        rows += part.shape[0]
    return total / rows


@torch.no_grad()
def measured_entropy(models: dict, methods: list[BoundMethod], n_train: int, n_max: int, instances: int,
                     test_seed: int = 4321, eq6_samples: int = 2048):
    """For each method, n = N * 2^k <= n_max and encoder layer: the mean entropy of the attention rows
    over `instances` test instances ("measured"), what Eq. 6 predicts for the method's lambda(n)
    ("eq6", standard normal q and k) and the entropy of i.i.d. Gaussian logits with the spread the
    model produces ("gaussian_logits"). `models` maps a trained method's key to its model; each
    method runs on `models[method.model_key]`. Returns a DataFrame (method, n, layer, lambda,
    measured, eq6, gaussian_logits)."""

    some = next(iter(models.values()))
    problem, d, device = some.problem, some.config.head_dim, next(some.parameters()).device
    rows = []
    for n in extrapolation_lengths(n_train, n_max):
        batch = fixed_test_set(problem, n, instances, test_seed, device)
        lam = [float(method.rule(float(n))) for method in methods]
        predicted = entropy_eq6(torch.full((len(methods),), n), torch.tensor(lam), d, samples=eq6_samples)
        for i, method in enumerate(methods):
            result = probe_encoder(models[method.model_key], batch, method)
            for layer, (entropy, spread) in enumerate(zip(result.entropies, result.logit_spread, strict=True)):
                rows.append({"method": method.key, "n": n, "layer": layer + 1, "lambda": lam[i],
                             "measured": float(entropy.mean()), "eq6": float(predicted.mean[i]),
                             "gaussian_logits": gaussian_row_entropy(n, spread, seed=layer)})
    return pd.DataFrame(rows)


@torch.no_grad()
def permutation_check(model: AttentionModel, instance: dict, method: BoundMethod | None = None,
                      seed: int = 0) -> dict:
    """Theorem 1 on `model`: largest absolute differences between f(pi X) and pi f(X) for the
    encoder output and the first-step log-probabilities, and between the greedy costs, with the
    problem's own permutation of its interchangeable nodes (`Problem.permute`; CVRP keeps its depot)."""
    model.eval()
    permuted, order = model.problem.permute(instance, torch.Generator().manual_seed(seed))
    order = order.to(next(iter(instance.values())).device)
    with method_applied(model, method):
        encoded = (model.encode(instance)[:, order] - model.encode(permuted)).abs().max()
        first = model.first_step_log_probs(instance)[:, order] - model.first_step_log_probs(permuted)
        first = first[torch.isfinite(first)].abs().max()
    costs = (greedy_costs(model, instance, method) - greedy_costs(model, permuted, method)).abs().max()
    return {"encoder": float(encoded), "first_step_log_p": float(first), "greedy_cost": float(costs)}
