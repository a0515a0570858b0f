"""The registry of extrapolation methods: each is declared once, here, and everything else reads it.

A `Method` says how a method is named in tables (`label`) and figures (`plot_label`, `colour`,
`linestyle`), whether a model is trained with it (`applied_to is None`) or it is applied at test
time to the model trained with another method (`applied_to`, the key of that method), and how its
attention is built from what the study has for a training length: the head size d, the training
length N, the fitted EIE net and the lambda* table (`make_rule`, and `attention`, the class of
`eie.attention` it runs with; a test-time method keeps the attention of the model it runs on and
swaps in its rule). Training (`TrainConfig.rule`), evaluation (`extrapolation.evaluate`), the
run checks, the notebooks' parameter checks, plots and tables all look methods up here, so a new
method is one `register(Method(...))` call (a test does it from its own file).

| key          | lambda(n)              | source                                  | model            |
|--------------|------------------------|-----------------------------------------|------------------|
| `inv_sqrt_d` | 1/sqrt(d)              | Vaswani et al.                          | trained          |
| `ln_sqrt_d`  | ln(n)/sqrt(d)          | Chiang & Cholak (2022)                  | trained          |
| `ln_d`       | ln(n)/d                | Su (2021)                               | trained          |
| `ssmax`      | ln(n+1)/sqrt(d)        | Scalable-Softmax as PENS uses it        | trained          |
| `log_N`      | log_N(n)/sqrt(d)       | calibrated log rule (= 1/sqrt(d) at N)  | the 1/sqrt(d) one |
| `eie`        | the fitted EIE net     | the EIE paper                           | the 1/sqrt(d) one |
| `exact`      | lambda*(n), tabulated  | H(n, lambda) = H(N, 1/sqrt(d)) solved   | the 1/sqrt(d) one |
| `dist_bias`  | 1/sqrt(d), bias -m_h r | PENS-A (ALiBi on distances)             | trained          |
| `rope`       | 1/sqrt(d), axial RoPE  | PENS-R                                  | trained          |
| `ptrnet`     | (additive attention)   | Pointer Network (Vinyals; Bello's RL)   | trained          |
| `eie_dist_bias` | the fitted EIE net  | EIE on the distance-bias model          | the dist_bias one |
| `eie_rope`   | the fitted EIE net     | EIE on the RoPE model                   | the rope one     |
| `rescale`    | 1/sqrt(d); coords * sqrt(n/N) | density-preserving rescaling    | the 1/sqrt(d) one |
| `rescale_dist_bias` | as `rescale`    | rescaling on the distance-bias model    | the dist_bias one |
| `eie_rescale` | EIE; coords * sqrt(n/N) | EIE and rescaling together            | the 1/sqrt(d) one |
| `bias_rescale` | bias -m_h sqrt(n/N) r | rescaling as PENS's models feel it     | the dist_bias one |
| `eie_bias_rescale` | EIE; bias as above | EIE and that rescaling together        | the dist_bias one |
| `rope_rescale` | RoPE angles * sqrt(n/N) | rescaling as PENS-R feels it          | the rope one     |

`eie.position_attention` holds the distance bias and the rotary encoding (and how PENS's constants
are converted to this study's [-1, 1]^2), `eie.pointer_network` the Pointer Network. Coordinate
rescaling by s(n) = sqrt(n/N) keeps the expected number of cities within a given distance of a city
what it was at N (the density n / (area * s^2) is constant). It is this study's rule, not PENS's:
PENS stretches the coordinates too, but picks its factor per size from a sweep (a quadratic fitted
to tour length against factor; 1.13 at 250 cities to 2.08 at 10 000 from N = 100, far below
sqrt(n/N)), which `eie.rivals.rescaling_sweep` and `best_factors` reproduce with fixed factors.

A test-time method must equal the method it is applied to at the training length (it is a way to
extrapolate, not another model); the run checks of the notebooks assert it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import scaling
from .attention import SITES, Attention
from .pointer_network import PointerNetwork
from .position_attention import AxialRoPE, DistanceBias
from .problems import PROBLEMS
from .scaling import ScalingRule


@dataclass(frozen=True)
class Method:
    key: str
    label: str  # plain text, for tables
    plot_label: str  # matplotlib mathtext, for figures
    colour: str
    make_rule: Callable[..., ScalingRule]  # (d, N=..., net=..., table=...) -> ScalingRule
    applied_to: str | None = None  # None: models are trained with it; else the method whose model it runs on
    linestyle: str = "-"
    # The `eie.attention.Attention` class it runs with. None: plain `Attention` for a trained method;
    # for a test-time method, the attention of the model it is applied to with this method's rule.
    attention: type | None = None
    # The policy class trained with it: None is `eie.model.AttentionModel`; any class built as
    # cls(problem, attention, config) with `rollout` and `sample_with_gradients` (the Pointer Network).
    model: type | None = None
    # A test-time coordinate factor s(n, N): the model sees the coordinates times s (costs are
    # measured on the originals); None leaves them alone. Must be 1 at n = N.
    coordinate_scale: Callable[[int, int], float] | None = None
    # A test-time factor s(n, N) on the positions the attention's distance bias or rotation sees
    # (`Attention.position_scale`), the embedded coordinates left alone; None: 1. Must be 1 at n = N.
    # Its n is the one the attention's rule sees (the context's n: with CVRP's `size_counts_depot`
    # it counts the depot, and the run check at n = N then reports the mismatch).
    position_scale: Callable[[int, int], float] | None = None
    # It uses the nodes' coordinates (a distance bias, a rotation, rescaled coordinates): it applies only
    # to problems whose nodes have them (`Problem.has_coordinates`; bin packing's boxes have none).
    needs_coordinates: bool = False
    # The problems (`eie.problems.PROBLEMS` keys) its model is written for; None: every problem.
    problems: tuple | None = None

    @property
    def trained(self) -> bool:
        return self.applied_to is None

    @property
    def model_key(self) -> str:
        """The trained method whose model this method runs on (itself when trained)."""
        return self.key if self.trained else self.applied_to

    def rule(self, d: int, N: int | None = None, net=None, table=None) -> ScalingRule:
        return self.make_rule(d, N=N, net=net, table=table)

    def build(self, d: int, N: int | None = None, net=None, table=None, sites=SITES,
              n_mode: str = "instance") -> Attention:
        """The attention a model trained with (or tested with) this method uses."""
        return (self.attention or Attention)(self.rule(d, N=N, net=net, table=table), sites=sites, n_mode=n_mode)

    def bind(self, d: int, N: int | None = None, net=None, table=None) -> "BoundMethod":
        """This method with its rule built for (d, N, net, table): what evaluation and probes take."""
        return BoundMethod(self, self.rule(d, N=N, net=net, table=table), N)


@dataclass(frozen=True)
class BoundMethod:
    """A method ready to run on a trained model: `attention_for(model)` gives the model's attention
    (same sites and n mode as it was trained with) with this method's rule; `seen_by_model(instance,
    problem)` the instance as the model sees it (coordinates rescaled when the method says so)."""

    method: Method
    rule: ScalingRule
    N: int | None = None

    def seen_by_model(self, instance: dict, problem) -> dict:
        scale = self.method.coordinate_scale
        if scale is None:
            return instance
        if self.N is None:
            raise ValueError(f"method {self.key!r} rescales coordinates by s(n, N) and needs the training length N")
        return problem.scale_coordinates(instance, float(scale(problem.size(instance), self.N)))

    @property
    def key(self) -> str:
        return self.method.key

    @property
    def model_key(self) -> str:
        return self.method.model_key

    def attention_for(self, trained: Attention) -> Attention:
        if self.method.attention is None and not self.method.trained:
            attention = trained.like(self.rule)  # e.g. EIE's scale on a model trained with a distance bias
        else:
            attention = (self.method.attention or Attention)(self.rule, sites=trained.sites, n_mode=trained.n_mode)
        if self.method.position_scale is not None:
            if self.N is None:
                raise ValueError(f"method {self.key!r} rescales positions by s(n, N) and needs the training length N")
            scale, N = self.method.position_scale, self.N
            attention.position_scale = lambda n: scale(n, N)
        return attention


_REGISTRY: dict[str, Method] = {}


def register(method: Method, replace: bool = False) -> Method:
    """Add `method` to the registry (refused if its key is taken, unless `replace`)."""
    if method.key in _REGISTRY and not replace:
        raise ValueError(f"a method {method.key!r} is already registered; pass replace=True to redefine it")
    if method.applied_to is not None and method.applied_to not in _REGISTRY:
        raise ValueError(f"method {method.key!r} is applied to {method.applied_to!r}, which is not registered")
    if method.applied_to is not None and not _REGISTRY[method.applied_to].trained:
        raise ValueError(f"method {method.key!r} must be applied to a trained method, not {method.applied_to!r}")
    _REGISTRY[method.key] = method
    return method


def unregister(key: str) -> None:
    _REGISTRY.pop(key, None)


def get(key: str) -> Method:
    try:
        return _REGISTRY[key]
    except KeyError:
        raise ValueError(f"unknown method {key!r}; registered: {', '.join(_REGISTRY)}") from None


def applies_to(key: str, problem: str) -> bool:
    """Whether method `key` can run on problem `problem` (a `eie.problems.PROBLEMS` key)."""
    method = get(key)
    if method.problems is not None and problem not in method.problems:
        return False
    return not method.needs_coordinates or PROBLEMS[problem].has_coordinates


def problems_for(key: str) -> list[str]:
    """The problems method `key` applies to."""
    return [problem for problem in PROBLEMS if applies_to(key, problem)]


def keys(trained: bool | None = None) -> list[str]:
    """Registered keys, in registration order; only the trained (or only the test-time) ones when asked."""
    return [k for k, m in _REGISTRY.items() if trained is None or m.trained == trained]


def label(key: str) -> str:
    """The table label of `key` (the key itself for names outside the registry, e.g. 'reference')."""
    return _REGISTRY[key].label if key in _REGISTRY else key


def labels() -> dict:
    return {k: m.label for k, m in _REGISTRY.items()}


def style(key: str) -> dict:
    """Matplotlib keyword arguments (colour, line style) of `key`; defaults outside the registry."""
    method = _REGISTRY.get(key)
    return {"color": method.colour, "linestyle": method.linestyle} if method else {"color": None, "linestyle": "-"}


def bind(method_keys, d: int, N: int, net=None, table=None) -> list[BoundMethod]:
    """`get(key).bind(d, N, net, table)` for each key."""
    return [get(key).bind(d, N=N, net=net, table=table) for key in method_keys]


# -- the study's methods -------------------------------------------------------------------------

def _needs_N(d, N=None, **_):
    if N is None:
        raise ValueError("the calibrated log rule 'log_N' needs the training length N")
    return scaling.log_N(d, N)


def _needs_net(d, net=None, **_):
    if net is None:
        raise ValueError("the 'eie' method needs a fitted net: eie.eie_net.load_eie_net(path, d=d)")
    if net.config.d != d:
        raise ValueError(f"the EIE net was fitted for d={net.config.d}, not d={d}")
    return scaling.eie(net)


def _needs_table(d, table=None, **_):
    if table is None:
        raise ValueError("the 'exact' method needs a lambda* table: eie.scaling.ExactTable.load(path, d=d)")
    if table.d != d:
        raise ValueError(f"the lambda* table is for d={table.d}, not d={d}")
    return scaling.exact(table)


for _method in (
    Method("inv_sqrt_d", "1/sqrt(d)", r"$1/\sqrt{d}$", "#4c72b0", lambda d, **_: scaling.inv_sqrt_d(d)),
    Method("ln_d", "ln(n)/d", r"$\ln n/d$", "#dd8452", lambda d, **_: scaling.ln_d(d)),
    Method("ln_sqrt_d", "ln(n)/sqrt(d)", r"$\ln n/\sqrt{d}$", "#8172b3", lambda d, **_: scaling.ln_sqrt_d(d)),
    Method("ssmax", "ln(n+1)/sqrt(d)", r"$\ln(n+1)/\sqrt{d}$", "#da8bc3", lambda d, **_: scaling.ssmax(d),
           linestyle=":"),
    Method("eie", "EIE", "EIE", "#c44e52", _needs_net, applied_to="inv_sqrt_d"),
    Method("exact", "exact lambda*", r"exact $\lambda^*$", "#222222", _needs_table, applied_to="inv_sqrt_d",
           linestyle="--"),
    Method("log_N", "log_N(n)/sqrt(d)", r"$\log_N n/\sqrt{d}$", "#937860", _needs_N, applied_to="inv_sqrt_d"),
):
    register(_method)


def density_preserving(n: int, N: int) -> float:
    """s(n) = sqrt(n / N): coordinates stretched so that the cities per unit area stay as at N."""
    return (n / N) ** 0.5


def _plain(d, **_):
    return scaling.inv_sqrt_d(d)


for _method in (
    Method("dist_bias", "distance bias (PENS-A)", "distance bias", "#55a868", _plain, attention=DistanceBias,
           needs_coordinates=True),
    Method("rope", "axial RoPE (PENS-R)", "axial RoPE", "#64b5cd", _plain, attention=AxialRoPE, needs_coordinates=True),
    Method("ptrnet", "Pointer Network", "Pointer Network", "#8c8c8c", _plain, model=PointerNetwork, linestyle=":",
           problems=("tsp",)),
    Method("eie_dist_bias", "EIE + distance bias", "EIE + distance bias", "#2e7d32", _needs_net,
           applied_to="dist_bias", linestyle="--", needs_coordinates=True),
    Method("eie_rope", "EIE + RoPE", "EIE + RoPE", "#1f6f8b", _needs_net, applied_to="rope", linestyle="--",
           needs_coordinates=True),
    Method("rescale", "rescaled coords", r"coords $\times\sqrt{n/N}$", "#ccb974", _plain, applied_to="inv_sqrt_d",
           coordinate_scale=density_preserving, needs_coordinates=True),
    Method("rescale_dist_bias", "distance bias + rescaled", r"distance bias, coords $\times\sqrt{n/N}$", "#b8860b",
           _plain, applied_to="dist_bias", coordinate_scale=density_preserving, linestyle="-.", needs_coordinates=True),
    Method("eie_rescale", "EIE + rescaled coords", r"EIE, coords $\times\sqrt{n/N}$", "#e377c2", _needs_net,
           applied_to="inv_sqrt_d", coordinate_scale=density_preserving, linestyle="-.", needs_coordinates=True),
    # PENS's rescaling as it acts on its own models, whose coordinates enter only through the bias or
    # the rotation: the positions those see are stretched, the embedded coordinates left alone.
    Method("bias_rescale", "distance bias, positions rescaled", r"distance bias, positions $\times\sqrt{n/N}$",
           "#006400", _plain, applied_to="dist_bias", position_scale=density_preserving, linestyle=":",
           needs_coordinates=True),
    Method("eie_bias_rescale", "EIE + distance bias, positions rescaled",
           r"EIE + distance bias, positions $\times\sqrt{n/N}$", "#9acd32", _needs_net, applied_to="dist_bias",
           position_scale=density_preserving, linestyle=":", needs_coordinates=True),
    Method("rope_rescale", "RoPE, positions rescaled", r"RoPE, positions $\times\sqrt{n/N}$", "#4682b4", _plain,
           applied_to="rope", position_scale=density_preserving, linestyle=":", needs_coordinates=True),
):
    register(_method)
