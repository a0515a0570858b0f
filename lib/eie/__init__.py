"""eie: a thin library for the reproducible study of length extrapolation with entropy-invariant
attention scaling (EIE) in neural combinatorial optimisation."""

__version__ = "0.1.0"
