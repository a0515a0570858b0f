"""The Pointer Network (Vinyals et al., 2015) for the TSP, trained like the Attention Model.

Vinyals et al. read the cities in their given order with an LSTM encoder, and at each decoding step
an LSTM decoder "points" at one input with additive attention,

    u_j = v^T tanh(W_ref e_j + W_q d_i),   p(next = j) = softmax over the unvisited j,

trained by supervised learning on solver tours. Here it is trained as Bello et al. (2016) do: with
REINFORCE, one glimpse before the pointer and tanh clipping C = 10, so it runs through the study's
own training loop (`eie.training`: the same greedy rollout baseline, batch, steps and learning rate
as every Attention Model of the study) and the comparison changes the architecture only, not the
training signal. Supervised learning would need optimal tours of every training instance (LKH on
20 000+ instances per epoch), and the trained models would not be comparable with the others.

Architecture (width D = the model config's `dim`): coordinates -> linear embedding -> LSTM encoder
(outputs e_j); decoder input: a learned start vector, then the embedding of the city just chosen;
decoder state d_i -> glimpse g = sum_j a_j W_ref' e_j with a = softmax(v'^T tanh(W_ref' e_j +
W_q' d_i)) over the unvisited cities -> pointer logits C tanh(v^T tanh(W_ref e_j + W_q g)).

Unlike the Attention Model it is not permutation equivariant: the LSTM encoder reads the cities in
their input order, so the same instance listed in another order may get another tour
(`eie.rivals.permutation_spread` measures by how much). It has no softmax scale over the nodes, so
no test-time scaling method applies to it; it has the `attention` attribute of the study's models
only so that the training and evaluation code can treat it like them.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import Attention
from .model import clipped_logits


class AdditiveAttention(nn.Module):
    """u_j = v^T tanh(W_ref e_j + W_q q); the reference projection W_ref e is computed once per episode."""

    def __init__(self, dim: int):
        super().__init__()
        self.project_ref = nn.Linear(dim, dim, bias=False)
        self.project_query = nn.Linear(dim, dim, bias=True)
        self.v = nn.Parameter(torch.empty(dim).uniform_(-dim ** -0.5, dim ** -0.5))

    def scores(self, ref: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """ref: (B, n, D) already projected; query (B, D) -> (B, n)."""
        return torch.tanh(ref + self.project_query(query)[:, None]) @ self.v


class PointerNetwork(nn.Module):
    """LSTM encoder-decoder with pointer attention for the TSP (`cls(problem, attention, config)` like
    `eie.model.AttentionModel`, with the same `rollout` and `sample_with_gradients`)."""

    def __init__(self, problem, attention: Attention, config):
        super().__init__()
        if problem.name != "tsp":
            raise ValueError(f"the Pointer Network is built for the TSP (a tour over the inputs), not {problem.name!r}")
        self.problem, self.attention, self.config = problem, attention, config
        dim = config.dim
        self.embed = nn.Linear(2, dim)
        self.encoder = nn.LSTM(dim, dim, batch_first=True)
        self.decoder = nn.LSTMCell(dim, dim)
        self.start = nn.Parameter(torch.empty(dim).uniform_(-1, 1))
        self.glimpse = AdditiveAttention(dim)
        self.pointer = AdditiveAttention(dim)
        self.action_head = None
        self.encoder_precision = "float32"  # the training loop sets it; the LSTMs always run in float32

    def rollout(self, instance: dict, decode: str = "greedy", generator: torch.Generator | None = None):
        """(tours (B, n), summed log-likelihood (B,)), greedy or sampled from `generator`."""
        if decode not in ("greedy", "sample"):
            raise ValueError(f"decode must be 'greedy' or 'sample', got {decode!r}")
        embedded = self.embed(instance["coords"])  # (B, n, D)
        encoded, (h, c) = self.encoder(embedded)
        h, c = h[0], c[0]
        glimpse_ref, pointer_ref = self.glimpse.project_ref(encoded), self.pointer.project_ref(encoded)
        state = self.problem.initial_state(instance)
        step_input = self.start.expand(embedded.shape[0], -1)
        log_likelihood = torch.zeros(embedded.shape[0], device=embedded.device)
        while not state.done:
            h, c = self.decoder(step_input, (h, c))
            blocked = state.mask()
            weights = torch.softmax(self.glimpse.scores(glimpse_ref, h).masked_fill(blocked, float("-inf")), dim=-1)
            query = (weights[:, None] @ glimpse_ref)[:, 0]  # (B, D)
            log_p = torch.log_softmax(clipped_logits(self.pointer.scores(pointer_ref, query), blocked, self.config), dim=-1)
            if decode == "greedy":
                action = log_p.argmax(dim=1)
            else:
                action = torch.multinomial(log_p.exp(), 1, generator=generator)[:, 0]
            log_likelihood = log_likelihood + log_p.gather(1, action[:, None])[:, 0]
            step_input = embedded.gather(1, action[:, None, None].expand(-1, 1, embedded.shape[-1]))[:, 0]
            state = state.update(action)
        return state.solution(), log_likelihood

    def sample_with_gradients(self, instance: dict, generator: torch.Generator | None = None):
        """Sampled tours and their log-likelihood with gradients (what REINFORCE needs)."""
        return self.rollout(instance, "sample", generator)
