"""The EIE net (Section 4.2 of the paper): a tiny network for d(lambda)/dn, integrated to lambda(n).

    f(x)      = ReQU(Y W + b) + eps                      (Eq. 11, so d(lambda)/dn > 0 by construction)
    Y         = N_r residual blocks of ReQUR layers        (Eq. 10)
    Y^(1)     = act(x W1 + b1)                             (Eq. 9)
    lambda(n) = lambda(N) + int_N^n f                      (Eq. 12, one 5-point Gauss-Legendre rule)

with lambda(N) = 1/sqrt(d), fitted by Algorithm 2 to make H(n, lambda(n)) = H(N, 1/sqrt(d)).

Three points the paper leaves open are parameters or documented choices here:
- `first_activation`: Eq. 9 writes ReLU, the sentence after it says ReQUR is applied. Default
  "requr", the smooth choice the text motivates; "relu" is the literal Eq. 9.
- `input_scale`: how n enters the net (f is then d(lambda)/dx for that input x; the integral of
  Eq. 12 is taken in x, which keeps d(lambda)/dn > 0 since x rises with n). Default "gaussian":
  x = sqrt(1/d + 2 ln(n/N)/d), the scale that keeps ln n - lambda^2 d / 2 (the large-n limit of
  Eq. 6) constant, so the net only learns the finite-n correction to a nearly constant f. "log":
  x = ln(n/N); "unit": x = (n - N)/(N_max - N); "raw": x = n, the literal reading, where
  d(lambda)/dn ~ 1e-4 is as small as eps itself and the first layer sees inputs in the thousands.
  With Algorithm 2's budget (500 Adam steps, lr 1e-3 decayed by 0.99 per step, so no parameter
  moves more than ~0.1) only "gaussian" reaches lambda* within 0.01; "log" and "unit" stay 0.03 to
  0.18 off (benchmarks/bench_eie_fit.py prints the comparison).
- `n_sampling`: Algorithm 2 draws "random integers" in (N, N_max] without a distribution. Default
  "log-uniform", which gives n in (N, 2N] as much weight as n in (8N, 16N]; "uniform" is the
  literal reading.
One caveat the paper does not mention: f > 0 makes the exact integral increase with n, but Eq. 12's
single 5-point rule moves its nodes with n, so for a rough f the quadrature can decrease (a test
shows it for random parameters). Fitted nets are smooth; notebook 02 checks their monotonicity.
The paper gives no initialisation either. ReQU has zero gradient for negative input, so a net whose
output pre-activation starts negative everywhere never moves: the output bias starts where f is
constant and lambda(N_max) equals the large-n-limit solution for the fitted target entropy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from .entropy import entropy_eq6, eq6_bytes
from .files import load_tensors, save_atomic
from .grad_mode import with_gradients
from .memory import check_fits
from .validation import check_d, check_lengths, check_n

FORMAT = "eie-net/1"
INPUT_SCALES = ("gaussian", "log", "unit", "raw")

# Five-point Gauss-Legendre rule on [-1, 1] (Algorithm 1).
_A, _B = math.sqrt(5 - 2 * math.sqrt(10 / 7)) / 3, math.sqrt(5 + 2 * math.sqrt(10 / 7)) / 3
GL5_NODES = torch.tensor([0.0, _A, -_A, _B, -_B], dtype=torch.float64)
GL5_WEIGHTS = torch.tensor(
    [128 / 225, (322 + 13 * math.sqrt(70)) / 900, (322 + 13 * math.sqrt(70)) / 900,
     (322 - 13 * math.sqrt(70)) / 900, (322 - 13 * math.sqrt(70)) / 900],
    dtype=torch.float64,
)


def requ(x: torch.Tensor) -> torch.Tensor:
    """ReQU(x) = ReLU(x)^2."""
    return torch.relu(x) ** 2


def requr(x: torch.Tensor) -> torch.Tensor:
    """ReQUR(x) = ReLU(x)^2 - ReLU(x - 0.5)^2: x^2 on [0, 0.5], then the line x - 0.25."""
    return torch.relu(x) ** 2 - torch.relu(x - 0.5) ** 2


def gauss_legendre_5(a: torch.Tensor, b: torch.Tensor, f) -> torch.Tensor:
    """Algorithm 1: int_a^b f(x) dx by one five-point Gauss-Legendre rule, for tensors a, b."""
    nodes = GL5_NODES.to(a.device, a.dtype)
    weights = GL5_WEIGHTS.to(a.device, a.dtype)
    half = (b - a) / 2
    x = half[..., None] * nodes + ((a + b) / 2)[..., None]
    return half * (f(x.reshape(-1, 1)).reshape(x.shape) * weights).sum(-1)


@dataclass(frozen=True)
class EIEConfig:
    d: int
    N: int
    N_max: int
    hidden: int = 10  # d'
    blocks: int = 3  # N_r
    eps: float = 1e-4
    first_activation: str = "requr"
    input_scale: str = "gaussian"

    def __post_init__(self):
        check_d(self.d)
        check_lengths(self.N, self.N_max)
        if self.first_activation not in ("requr", "relu"):
            raise ValueError(f"first_activation must be 'requr' or 'relu', got {self.first_activation!r}")
        if self.input_scale not in INPUT_SCALES:
            raise ValueError(f"input_scale must be one of {INPUT_SCALES}, got {self.input_scale!r}")
        if self.hidden < 1 or self.blocks < 0 or self.eps <= 0:
            raise ValueError("hidden >= 1, blocks >= 0 and eps > 0 are required")


class EIENet(nn.Module):
    """lambda(n) for one head size d, training length N and range N_max."""

    def __init__(self, config: EIEConfig):
        super().__init__()
        self.config = config
        c = config
        self.first = nn.Linear(1, c.hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(c.hidden, c.hidden), nn.Linear(c.hidden, c.hidden)) for _ in range(c.blocks)
        )
        self.last = nn.Linear(c.hidden, 1)
        self.double()
        # Before fitting: lambda(N_max) at the large-n limit solution with H0 = ln N - 1/2 (Eq. 6 at N).
        self.init_output(self.large_n_rise(math.log(c.N) - 0.5))

    def large_n_rise(self, target_entropy: float) -> float:
        """lambda(N_max) - lambda(N) for the large-n limit: ln N_max - lambda^2 d / 2 = target_entropy."""
        c = self.config
        lam_max = math.sqrt(max(2 * (math.log(c.N_max) - target_entropy) / c.d, 0.0))
        return max(lam_max - self.lambda_at_N, 1e-3)

    def init_output(self, rise: float) -> None:
        """Set the output bias so that f starts constant-level and lambda rises by `rise` over [N, N_max]."""
        c = self.config
        ends = self._to_input(torch.tensor([float(c.N), float(c.N_max)], dtype=torch.float64))
        with torch.no_grad():
            self.last.bias.fill_(math.sqrt(rise / float(ends[1] - ends[0])))

    @property
    def lambda_at_N(self) -> float:
        return 1.0 / math.sqrt(self.config.d)

    def _to_input(self, n: torch.Tensor) -> torch.Tensor:
        c = self.config
        if c.input_scale == "gaussian":
            return torch.sqrt(torch.clamp(1.0 / c.d + 2.0 * torch.log(n / c.N) / c.d, min=0.0))
        if c.input_scale == "log":
            return torch.log(n / c.N)
        if c.input_scale == "unit":
            return (n - c.N) / (c.N_max - c.N)
        return n

    def derivative(self, x: torch.Tensor) -> torch.Tensor:
        """f(x; theta) > 0: d(lambda)/dx in the net's input units (Eq. 9-11); x of shape (..., 1)."""
        act = requr if self.config.first_activation == "requr" else torch.relu
        y = act(self.first(x))
        for block in self.blocks:
            y = requr(block[1](requr(block[0](y)))) + y
        return (requ(self.last(y)) + self.config.eps)[..., 0]

    def forward(self, n) -> torch.Tensor:
        """lambda(n) by Eq. 12, for any real n (values below N integrate backwards)."""
        n = n.to(torch.float64) if torch.is_tensor(n) else torch.as_tensor(n, dtype=torch.float64)
        start = self._to_input(torch.full_like(n, float(self.config.N)))
        return self.lambda_at_N + gauss_legendre_5(start, self._to_input(n), self.derivative)


@dataclass
class FitHistory:
    loss: list[float]
    target_entropy: float
    target_se: float


@with_gradients
def fit_eie(
    d: int,
    N: int,
    N_max: int,
    epochs: int = 500,
    batch_size: int = 256,
    lr: float = 1e-3,
    lr_decay: float = 0.99,
    samples: int = 16,
    seed: int = 0,
    target_samples: int = 65536,
    progress: bool = True,
    n_sampling: str = "log-uniform",
    **net_options,
) -> tuple[EIENet, FitHistory]:
    """Algorithm 2: fit the EIE net so that H(n, lambda(n)) = H(N, 1/sqrt(d)) for N < n <= N_max.

    Each epoch is one Adam step on B integers n uniform in (N, N_max]; H is the Eq. 6 estimator with
    `samples` stratified rows per n on fresh normals. The target H(N, 1/sqrt(d)) is estimated once,
    precisely (`target_samples` rows, control variates). The learning rate is multiplied by
    `lr_decay` after every epoch. Gradients are on whatever grad mode the caller is in.
    """
    config = EIEConfig(d=d, N=N, N_max=N_max, **net_options)
    if n_sampling not in ("uniform", "log-uniform"):
        raise ValueError(f"n_sampling must be 'uniform' or 'log-uniform', got {n_sampling!r}")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    check_fits(f"the EIE fit (batch {batch_size} x {samples} rows)",
               lambda n: eq6_bytes(batch_size, samples, n), N_max, name="N_max", low=N + 1,
               advice="lower N_max, batch_size or samples")
    torch.manual_seed(seed)
    net = EIENet(config)
    target = entropy_eq6(N, 1 / math.sqrt(d), d, samples=target_samples, seed=seed + 1, control_variates=True)
    h_target = target.mean.detach()
    net.init_output(net.large_n_rise(float(h_target)))
    generator = torch.Generator().manual_seed(seed + 2)
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma=lr_decay)
    losses = []
    for _ in tqdm(range(epochs), desc=f"fit EIE d={d} N={N}", disable=not progress, mininterval=1.0):
        if n_sampling == "uniform":
            n = torch.randint(N + 1, N_max + 1, (batch_size,), generator=generator)
        else:  # log-uniform on (N, N_max], rounded to integers
            u = torch.rand(batch_size, generator=generator, dtype=torch.float64)
            n = torch.clamp(torch.round(N * (N_max / N) ** u), N + 1, N_max).to(torch.long)
        lam = net(n.to(torch.float64))
        h = entropy_eq6(n, lam, d, samples=samples, generator=generator).mean
        loss = ((h - h_target) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
    net.eval()
    return net, FitHistory(losses, float(h_target), float(target.se))


def save_eie_net(net: EIENet, path) -> Path:
    """Save a fitted net with its configuration (d, N, N_max and the open choices)."""
    return save_atomic({"format": FORMAT, "config": asdict(net.config), "state_dict": net.state_dict()}, path)


def load_eie_net(path, d: int | None = None, N: int | None = None) -> EIENet:
    """Load a net saved by `save_eie_net`; refuse one fitted for another head size d (or N)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no fitted EIE net at {path}: run notebooks/02_fit_eie.ipynb (or eie.eie_net.fit_eie and "
            "save_eie_net) to create it"
        )
    payload = load_tensors(path, "EIE net")
    try:
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(f"format is {payload.get('format') if isinstance(payload, dict) else type(payload).__name__}, expected {FORMAT}")
        net = EIENet(EIEConfig(**payload["config"]))
        net.load_state_dict(payload["state_dict"])
    except Exception as error:  # corrupt, truncated, or another kind of file
        raise ValueError(
            f"{path} is not a loadable EIE net ({error}); delete it and refit with notebooks/02_fit_eie.ipynb"
        ) from error
    check_fitted(net, path)
    for name, wanted in (("d", d), ("N", N)):
        have = getattr(net.config, name)
        if wanted is not None and wanted != have:
            raise ValueError(
                f"the EIE net in {path} was fitted for {name}={have}, not {name}={wanted}: "
                f"fit one for {name}={wanted} (notebooks/02_fit_eie.ipynb) or use the matching model"
            )
    net.eval()
    return net


def check_fitted(net: EIENet, source="the EIE net") -> EIENet:
    """Refuse a net whose lambda(n) is not finite, positive and non-decreasing on [N, N_max] (what a
    corrupted or diverged file gives), naming `source`."""
    c = net.config
    grid = torch.as_tensor(np.unique(np.round(np.geomspace(c.N, c.N_max, 64))), dtype=torch.float64)
    with torch.no_grad():
        lam = net(grid)
    problem = None
    if not bool(torch.isfinite(lam).all()):
        problem = "non-finite lambda(n)"
    elif bool((lam <= 0).any()):
        problem = f"lambda(n) <= 0 (min {float(lam.min()):.3g})"
    elif bool((lam.diff() < -1e-9).any()):
        problem = "lambda(n) decreasing in n"
    if problem:
        raise ValueError(f"{source} gives {problem} on N={c.N}..N_max={c.N_max}: it is not a usable fit; "
                         "delete it and refit with notebooks/02_fit_eie.ipynb")
    return net


def eie_lambda(net: EIENet, n) -> np.ndarray:
    """lambda(n) as numbers (no gradient), for n >= 1."""
    check_n(n)
    with torch.no_grad():
        return net(torch.as_tensor(n, dtype=torch.float64)).numpy()
