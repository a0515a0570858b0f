# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext,-all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] tags=[]
# # 10 · Which attention scale does a trained model want, and under which decoding?
#
# EIE chooses λ(n) so that the attention entropy at n equals its value at the training length. Is that
# the scale the trained 1/√d model works best with? A **λ sweep** answers it directly: decode the
# same test instances with a constant λ = f/√d at every n for a grid of factors f, and mark the
# factors EIE (λ(n)√d) and log_N (ln n / ln N) use at that n. If EIE's factor lies beyond the factors
# within two standard errors of the best, EIE sharpens the attention further than the model can use.
#
# Each sweep is one seed's model, computed by `python scripts/lambda_sweep.py PRESET --problem P --seed K`
# (minutes to an hour on a CPU) into `results/<run>/lambda_sweep_<problem><tag>_seed<k>.csv`; this
# notebook reads every sweep of the run, draws each (`figures/<run>_lambda_sweep_*.png`) and gives the
# optimum per seed and its mean over seeds.

# %% tags=["parameters"]
preset = ""  # type: str  a preset file (presets/NAME.yaml) whose values replace the defaults; every setting: python -m eie.experiments 10_lambda_sweeps
run = None  # type: str  None: the preset's, else 'cpu_paper'; results/<run>/ whose sweeps are read

# %% tags=[]
import re

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from eie import decoding_modes, lambda_sweep
from eie.comparison import markdown_table
from eie.experiments import configure
from eie.paths import results_dir
from eie.plotting import apply_style, decoding_modes_figure, save_figure
from eie.problems import PROBLEMS

globals().update(configure("10_lambda_sweeps", globals()))  # the experiment: every setting checked before any compute
apply_style()
files = sorted(results_dir(run, create=False).glob("lambda_sweep_*_seed*.csv"))
groups = {}
for path in files:
    problem, tag, seed = re.fullmatch(r"lambda_sweep_([a-z]+)(_[^_]+)?_seed(\d+)", path.stem).groups()
    groups.setdefault((problem, tag or ""), {})[int(seed)] = lambda_sweep.read_sweep(path)
print(f"results/{run}/: {len(files)} sweeps of {len(groups)} model kinds")

# %% [markdown] tags=[]
# ## The optimum per seed and over seeds
#
# `best_f` is the grid's best constant factor; `f_low`–`f_high` the factors whose mean is within two
# standard errors of it; `eie_f` and `log_N_f` the factors the two rules use at that n, with their
# effect against 1/√d (%, negative is better for TSP and CVRP, positive for bin packing's load rate).

# %% tags=[]
columns = ["seed", "n", "best_f", "f_low", "f_high", "best_vs_inv_sqrt_d_pct", "eie_f", "eie_vs_inv_sqrt_d_pct",
           "log_N_f", "log_N_vs_inv_sqrt_d_pct"]
for (problem, tag), sweeps in groups.items():
    best = lambda_sweep.best_factors(sweeps, maximise=PROBLEMS[problem].maximise)
    over = lambda_sweep.optimum_over_seeds(best)
    display(Markdown(f"### {problem.upper()}{tag.replace('_', ' ')}, seeds {', '.join(map(str, sorted(sweeps)))}\n\n"
                     + markdown_table(best[[c for c in columns if c in best]].round(2).astype(object).set_index("seed"), "seed")
                     + "\n\nOver seeds (mean best factor, 95 % t interval):\n\n"
                     + markdown_table(over.round(2).astype(object).set_index("n"), "n")))

# %% [markdown] tags=[]
# ## Each sweep
#
# The grey line is the constant factor's effect against 1/√d with a band of ±2 standard errors; the
# diamonds are EIE and log_N at the factor they use.

# %% tags=[]
for (problem, tag), sweeps in groups.items():
    cls = PROBLEMS[problem]
    for seed, frame in sorted(sweeps.items()):
        stem = lambda_sweep.sweep_name(problem, tag, seed)
        objective = cls.objective_name.removesuffix(" (%)")
        fig = lambda_sweep.sweep_figure(frame, f"{problem.upper()}{tag.replace('_', ' ')} model, seed {seed}: "
                                        f"a constant scale against EIE's and log_N's", objective, cls.maximise)
        save_figure(fig, f"{run}_{stem}")
        plt.close(fig)
print("figures written")

# %% [markdown] tags=[]
# ## Under other decoding modes
#
# The sweeps decode greedily. Practitioners often decode with sampling (best of K) or over the 8
# symmetries of the square (best of 8 greedy tours). Does EIE's effect keep its sign there? Each
# method is compared with the 1/√d model of the same seed *under the same mode*; the first panel
# shows what the mode itself does to the 1/√d model against its own greedy decoding. Computed by
# `python scripts/decoding_modes.py PRESET NOTEBOOK --lengths ... --modes greedy sample16 augment8
# --factors 1.25` into `results/<run>/decoding_modes.csv`; drawn here into
# `figures/decoding_modes_<run>.png`.

# %% tags=[]
modes_file = results_dir(run, create=False) / "decoding_modes.csv"
if modes_file.is_file():
    modes = decoding_modes.read_modes(modes_file)
    display(Markdown(decoding_modes.modes_markdown(modes, source=modes_file.name).split("\n", 2)[2]))
    fig = decoding_modes_figure(modes)
    save_figure(fig, "decoding_modes", run)
    plt.show()
else:
    print(f"results/{run}/ has no decoding-modes table")
