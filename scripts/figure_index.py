"""Write figures/README.md: every figure under figures/, what it shows and what writes it.

    python scripts/figure_index.py          (rewrite the index; tests/test_findings.py checks it is complete)

A figure's run is the suffix of its name (`<name>_<run>.png`; none: the smoke run of `make study`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# every preset's run, longest first so that a run whose name extends another's (cpu_paper_rivals) wins
RUNS = tuple(sorted({p.stem for p in (ROOT / "presets").glob("*.yaml")} | {"rivals"}, key=lambda run: (-len(run), run)))
# (pattern on the name without the run suffix, what it shows, what writes it)
KINDS = [
    (r"verdict", "the verdict: every method against 1/√d, seed by seed, against n/N, the paper's effects beside", "notebook 09"),
    (r"decoding_modes", "each method against 1/√d under greedy, sampled and symmetry-augmented decoding, per seed",
     "scripts/decoding_modes.py"),
    (r"sampling_spread", "why best-of-K sampling favours EIE on some seeds: each seed's mean-sample and best-of-16 effect, "
     "and the spread of the sampled lengths against the entropy per step", "`scripts/diagnostics/sampling_spread.py`"),
    (r"bpp_pilots", "bin packing at 100 boxes: the recipe pilots' greedy and sampled load per epoch beside the run "
     "they branch from", "`scripts/diagnostics/bpp_pilots.py`"),
    (r"01_entropy_by_rule", "H(n) under each scaling rule, d = 16 and 32 (Figure 2's content)", "notebook 01"),
    (r"01_relative_entropy_change", "relative change of H(n) against n per rule", "notebook 01"),
    (r"01_gaussian_limit", "where the Gaussian limit of the entropy holds", "notebook 01"),
    (r"figure7_eq6_vs_eq21", "Figure 7: Eq. 6 against Eq. 21", "notebook 01"),
    (r"figure3_4_lambda", "Figures 3, 4: λ(n) of the paper, of our EIE net and the exact λ*", "notebook 02"),
    (r"figure2_5_entropy", "Figures 2, 5: the learned H(n)", "notebook 02"),
    (r"02_eie_fit_loss", "the EIE net's training loss", "notebook 02"),
    (r"\d\d_\w+_training_progress", "training curves so far of a run still training",
     "`python -m eie.worker PRESET NOTEBOOK --status --plot`"),
    (r"03_tsp_training", "TSP training curves (held-out greedy cost per epoch)", "notebook 03"),
    (r"03_tsp_extrapolation", "TSP: objective, gap to LKH and change against 1/√d, against n", "notebook 03"),
    (r"04_cvrp_training", "CVRP training curves", "notebook 04"),
    (r"04_cvrp_extrapolation", "CVRP: objective, gap to HGS and change against 1/√d, against n", "notebook 04"),
    (r"05_bpp_training", "bin-packing training curves", "notebook 05"),
    (r"05_bpp_extrapolation", "bin packing: load rate, gap to the best heuristic and change against 1/√d", "notebook 05"),
    (r"05_bpp_\d+x\d+", "one packed bin drawn in 3D", "notebook 05"),
    (r"06_(tsp|cvrp|bpp)", "Tables 1-3 as a figure: objective and gap against n per method", "notebook 06"),
    (r"07_figure6_js_divergence", "Figure 6: JS divergence of the attention inputs to N(0, 1)", "notebook 07"),
    (r"07_entropy_measured_vs_gaussian", "measured attention entropy per layer against Eq. 6 and Gaussian logits",
     "notebook 07"),
    (r"08_(training|rivals_training)", "training curves of the rivals", "notebook 08"),
    (r"08_(extrapolation|rivals_extrapolation)", "the rivals against n", "notebook 08"),
    (r"08_rescaling_sweep", "coordinate rescaling: a sweep of fixed factors", "notebook 08"),
    (r"08_receptive_field", "the receptive-field condition in 2D: theory, Monte Carlo, trained models", "notebook 08"),
    (r"08_tsplib", "TSPLIB: gap to the optimum per instance and method", "notebook 08"),
    (r"lambda_sweep.*", "a sweep of constant scales λ = f/√d on trained models, EIE's and log_N's factors marked",
     "notebook 10 (sweeps: `scripts/lambda_sweep.py`)"),
    (r"gpu_budget_probe", "TSP20 trained on a GPU past the CPU budget", "`scripts/diagnostics/gpu_budget_probe.py`"),
    (r"tsplib_gaps", "TSPLIB gaps of the N = 100 models", "`scripts/tsplib_table.py`"),
]


def describe(name: str) -> tuple[str, str, str]:
    stem = name.removesuffix(".png")
    run = "default"
    for candidate in RUNS:
        if stem.startswith(candidate + "_"):
            stem, run = stem[len(candidate) + 1:], candidate
            break
        if stem.endswith("_" + candidate) or f"_{candidate}_" in stem:
            stem, run = stem.replace("_" + candidate, ""), candidate
            break
    for pattern, shows, writer in KINDS:
        if re.fullmatch(pattern + r"(_.*)?", stem):
            return run, shows, writer
    raise ValueError(f"figures/{name}: no entry in scripts/figure_index.py's KINDS; add one")


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    names = sorted(p.name for p in (ROOT / "figures").glob("*.png"))
    rows = [describe(name) for name in names]
    lines = ["# Figures", "", "Every figure under `figures/`: what it shows and what writes it. The run is the name's",
             "suffix (`default`: the smoke-sized run of `make study`; the others are in `results/<run>/README.md`).",
             "Written by `python scripts/figure_index.py`.", "", "| figure | run | shows | written by |", "|---|---|---|---|"]
    lines += [f"| [{name}]({name}) | {run} | {shows} | {writer} |" for name, (run, shows, writer) in zip(names, rows, strict=True)]
    (ROOT / "figures" / "README.md").write_text("\n".join(lines) + "\n")
    print(f"figures/README.md: {len(names)} figures")


if __name__ == "__main__":
    main()
