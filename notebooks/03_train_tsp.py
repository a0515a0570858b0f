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
# # 03 · TSP: train short, test long (Table 2)
#
# Trains the CO-Transformer (Kool et al.'s Attention Model with LayerNorm; `eie.model`) with
# REINFORCE and a greedy rollout baseline (`eie.training`) on TSP with `n_train` cities, one model
# per seed for each rule that changes the scale at the training length ($1/\sqrt d$, $\ln n/d$,
# $\ln n/\sqrt d$), then decodes greedily on fixed test sets at $n = N \cdot 2^k$ up to `n_max`.
# The model trained with $1/\sqrt d$ is also run, unchanged, with the training-free rules: **EIE**,
# the **exact** entropy-invariant $\lambda^*$ and the calibrated $\log_N n/\sqrt d$. Every tour is
# checked to be a permutation; gaps are against LKH (`elkai`) on the first `reference_size`
# instances of each test set.
#
# The defaults are smoke-sized (TSP20 → 160, a few epochs, two seeds) so the notebook runs in
# minutes on a laptop CPU; `presets/paper.yaml` holds the paper's settings (TSP100 → 1600, 500 × 10
# steps of batch 256, five seeds, 16384 test instances), meant for a GPU:
# `papermill notebooks/03_train_tsp.ipynb out.ipynb -f presets/paper.yaml`.
# Results: `results/<run>/tsp.csv` (long format), per-instance costs, training logs and checkpoints.
#
# On another machine (another thread count or CPU family) training sums in another order, samples
# other tours, and the trained models' numbers differ: the cells that show them are not compared by
# `pytest --nbval`; the **run checks** after them are, and hold on every machine for a correct run.

# %% tags=["parameters"]
preset = ""  # type: str  a preset file (presets/NAME.yaml) whose values replace the defaults; every setting: python -m eie.experiments 03_train_tsp
n_train = None  # type: int  None: the preset's, else 20; training length N
n_max = None  # type: int  None: the preset's, else 160; test at N, 2N, 4N, ... up to n_max
seeds = None  # type: list[int]  None: the preset's, else [0, 1]
epochs = None  # type: int  None: the preset's, else 4
device = None  # type: str  None: the preset's, else 'auto'
progress = None  # type: bool  None: the preset's, else True; progress bars
run = None  # type: str  None: the preset's, else 'default'; results/<run>/ to write (and read)

# %% tags=[]
import matplotlib.pyplot as plt

from eie import comparison, run_checks, study
from eie.experiments import configure
from eie.plotting import apply_style, extrapolation_figure, save_figure, training_figure

params = configure("03_train_tsp", globals())  # the experiment: every setting checked before any compute
globals().update(params)
rule_seeds = study.seeds_by_rule(params)  # {rule: its seeds}
apply_style()
d = study.head_size("03_train_tsp", params)  # head size of the model: its width over its heads

# %% [markdown] tags=[]
# ## Entropy-invariant scales for this training length
#
# The EIE net and the exact $\lambda^*$ are fitted for $(d, N, N_{max})$ = (16, `n_train`, `n_max`),
# or loaded from `results/<run>/eie_nets/` when notebook 02 or an earlier run saved them.

# %% tags=[]
net, table = study.ensure_scales(d, n_train, n_max, run=run)
print(study.describe_scales(net, table, d, n_train, n_max))

# %% [markdown] tags=[]
# ## Training
#
# Checkpoints are written after every epoch to `results/<run>/checkpoints/`: rerunning the notebook
# resumes each model where it stopped (and skips finished ones). The training log goes to
# `results/<run>/tsp_training_log.csv`, the first seed's policies (weights only, what notebook 07
# reads) to `results/<run>/models/`.

# %% tags=[]
models, logs = study.train_problem("03_train_tsp", params)
print(run_checks.check_training_log(logs, rules, rule_seeds, epochs, plateau_window, plateau_tolerance, lr_drops,
                                    lr_floor))

# %% [markdown] tags=[]
# Held-out greedy tour length of the policy each model keeps (`final_policy`: its last, or the rollout
# baseline's), by rule and seed (machine-dependent, not compared):

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(study.kept_held_out(logs, ["rule", "seed"]).round(2).to_string())

# %% tags=[]
fig = training_figure(logs, f"greedy tour length, TSP{n_train}", mark_lr_drops=lr_drops > 0)
save_figure(fig, "03_tsp_training", run=run)
plt.show()

# %% [markdown] tags=[]
# ## Extrapolation (Table 2)

# %% tags=[]
results, per_instance, references = study.evaluate_problem("03_train_tsp", params, models, net, table, d)
print("Every reported tour passed the permutation check.")

# %% [markdown] tags=[]
# Run checks (compared on every machine): every method and seed at every $n$, the training-free
# rules equal to the $1/\sqrt d$ model at $N$, every model within `max_gap_at_n_train` % of LKH at $N$.

# %% tags=[]
print(run_checks.check_extrapolation(results, n_train, "LKH", max_gap_at_n_train))

# %% [markdown] tags=[]
# Mean tour length (standard deviation over seeds), best per column in bold; the gap to LKH in
# percent; and when `n_train = 100` the paper's Table 2 (TSP100 → 1600, five seeds) with both
# relative to the $1/\sqrt d$ model (machine-dependent, not compared).

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(comparison.problem_tables("tsp", results, per_instance))

# %% tags=[]
fig = extrapolation_figure(results, "mean tour length", "LKH (subset)")
fig.suptitle(f"TSP, trained on n = {n_train} (bands: std over seeds)", y=1.01)
save_figure(fig, "03_tsp_extrapolation", run=run)
plt.show()
