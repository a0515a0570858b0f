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
# # 08 · The rivals: distance bias, rotary encoding, rescaled coordinates, the Pointer Network, TSPLIB
#
# EIE keeps a model trained at $N$ working at $n \gg N$ by changing one number, the attention scale.
# The references describe other ways to extrapolate; this notebook puts them beside it on TSP, on
# the same fixed test sets, with the same training (REINFORCE, greedy rollout baseline, the budget
# of notebook 03) and the same decoding (greedy):
#
# - **trained at $N$**: the $1/\sqrt d$ model (EIE's base), **Scalable-Softmax** $\ln(n+1)/\sqrt d$,
#   the **distance bias** $-m_h\lVert x_i - x_j\rVert$ of PENS-A on the encoder's logits, the
#   **axial RoPE** of PENS-R, and the **Pointer Network** (LSTM encoder-decoder, trained with the same
#   REINFORCE; `eie.pointer_network` says why not supervised);
# - **at test time, without retraining**: EIE, the exact $\lambda^*$ and $\log_N n/\sqrt d$ on the
#   $1/\sqrt d$ model; **coordinates rescaled** by $s(n) = \sqrt{n/N}$ (the density-preserving
#   factor; PENS picks its factor from a sweep instead, below) on the $1/\sqrt d$ and distance-bias
#   models and together with EIE; the same factor on the **positions only** (the distances the bias
#   sees, the angles RoPE sees; the embedded coordinates as they are), which is what rescaling does
#   to PENS's own models, whose coordinates enter only there; EIE on the distance-bias and RoPE
#   models.
#
# Then: a sweep of fixed rescaling factors; how much the Pointer Network's tours depend on the
# order of its input (Theorem 1 says the Attention Model's do not); the receptive-field condition of
# the RPE paper carried to two dimensions (theory and Monte Carlo, and the trained models' measured
# entropies); and the 48 TSPLIB instances, scored exactly against their optimal tours.
#
# `eie.methods` declares every method once (how PENS's constants are converted to this study's
# $[-1, 1]^2$ is in `eie.position_attention`). The defaults are smoke-sized and train with notebook
# 03's settings (its $1/\sqrt d$ model is reused when 03 ran first); the committed CPU-scale run
# (TSP20 → 320, three seeds, 2000 steps of batch 128) is `presets/rivals.yaml`, in `results/rivals/`:
# `papermill notebooks/08_rivals.ipynb out.ipynb -f presets/rivals.yaml`.
# Results go to `results/<run>/rivals_*.csv` (beside notebook 03's own files in the same run).
#
# As in notebook 03, what trained models give is machine-dependent and not compared by
# `pytest --nbval`; the run checks and the closed-form theory are.

# %% tags=["parameters"]
preset = ""  # type: str  a preset file (presets/NAME.yaml) whose values replace the defaults; every setting: python -m eie.experiments 08_rivals
n_train = None  # type: int  None: the preset's, else 20; training length N
n_max = None  # type: int  None: the preset's, else 160; test at N, 2N, 4N, ... up to n_max
seeds = None  # type: list[int]  None: the preset's, else [0, 1]
epochs = None  # type: int  None: the preset's, else 4
device = None  # type: str  None: the preset's, else 'auto'
progress = None  # type: bool  None: the preset's, else True; progress bars
run = None  # type: str  None: the preset's, else 'default'; results/<run>/ to write (and read)

# %% tags=[]
import matplotlib.pyplot as plt
import pandas as pd

from eie import comparison, extrapolation, methods, probes, receptive_field, rivals, run_checks, study, tsplib
from eie.evaluation import extrapolation_lengths
from eie.experiments import configure
from eie.paths import results_dir
from eie.plotting import (
                          apply_style,
                          extrapolation_figure,
                          receptive_field_figure,
                          rescaling_figure,
                          save_figure,
                          training_figure,
                          tsplib_figure,
)
from eie.position_attention import alibi_slopes

params = configure("08_rivals", globals())  # the experiment: every setting checked before any compute
globals().update(params)
rule_seeds = study.seeds_by_rule(params)  # {rule: its seeds}
apply_style()
d = study.head_size("08_rivals", params)  # head size of the model: its width over its heads
out = results_dir(run)
pd.set_option("display.width", 160)

# %% [markdown] tags=[]
# ## Training
#
# One model per trained method and seed, resumable from `results/<run>/checkpoints/`; a model with
# the same training settings as notebook 03's (the $1/\sqrt d$ one) is the same file and is not
# trained twice.

# %% tags=[]
net, table = study.ensure_scales(d, n_train, n_max, run=run)
trained, logs = study.train_problem("08_rivals", params, prefix="rivals_")
models = trained[""]
print(run_checks.check_training_log(logs, rules, rule_seeds, epochs, plateau_window, plateau_tolerance, lr_drops,
                                    lr_floor))

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(study.kept_held_out(logs, ["rule", "seed"]).round(2).to_string())  # of the policy each model keeps (`final_policy`)

# %% tags=[]
fig = training_figure(logs, f"greedy tour length, TSP{n_train}", mark_lr_drops=lr_drops > 0)
save_figure(fig, "08_rivals_training", run=run)
plt.show()

# %% [markdown] tags=[]
# ## Extrapolation: every method on the fixed test sets

# %% tags=[]
results, per_instance, references = study.evaluate_problem("08_rivals", params, trained, net, table, d,
                                                           prefix="rivals_")
print("Every reported tour passed the permutation check.")
print(run_checks.check_extrapolation(results, n_train, "LKH", max_gap_at_n_train))

# %% [markdown] tags=[]
# Mean tour length (standard deviation over seeds; best per column in bold) and the gap to LKH on
# the first `reference_size` instances, in Table 2's layout (machine-dependent, not compared):

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(comparison.problem_tables("tsp", results, per_instance, source="rivals"))

# %% tags=[]
fig = extrapolation_figure(results, "mean tour length", "LKH (subset)")
fig.suptitle(f"TSP, trained on n = {n_train}: EIE and its rivals (bands: std over seeds)", y=1.01)
save_figure(fig, "08_rivals_extrapolation", run=run)
plt.show()

# %% [markdown] tags=[]
# **EIE against each rival**, paired by instance (seeds averaged first): mean difference in tour
# length (negative: EIE shorter), its 95 % interval, Wilcoxon signed-rank p, Holm-corrected over
# every row (machine-dependent, not compared).

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
paired = comparison.paired_comparison(per_instance, "eie", alpha=alpha)
paired = paired[paired.n > n_train]
paired.to_csv(out / "rivals_paired_eie.csv", index=False, float_format="%.6g")
print(paired.assign(other=paired.other.map(methods.label)).drop(columns="setting").round(4).to_string(index=False))

# %% [markdown] tags=[]
# ## Coordinate rescaling: a sweep of fixed factors
#
# PENS stretches the coordinates by a factor it picks per size from such a sweep (a quadratic fitted
# to tour length against factor; its factors, 1.13 at 250 cities to 2.08 at 10 000 from $N = 100$,
# are far below $\sqrt{n/N}$, the density-preserving factor of this study's `rescale` methods). Every
# factor of `rescale_factors` at every $n$, on the models of `sweep_models`; the dotted lines mark
# $\sqrt{n/N}$. The best factor per $n$ is chosen on the test set itself, so its tour length is an
# optimistic bound for PENS's way of choosing.

# %% tags=[]
swept = [key for key in sweep_models if key in rules] or rules[:1]  # a preset may train other models
sweep = rivals.rescaling_sweep(models, swept, rescale_factors, n_train, n_max, test_size, test_seed,
                               chunk=eval_chunk, device=device, progress=progress,
                               store=study.run_evaluation_store(run))  # resumable, like the table above
sweep.to_csv(out / "rivals_rescaling_sweep.csv", index=False, float_format="%.5f")
fig = rescaling_figure(sweep)
save_figure(fig, "08_rescaling_sweep", run=run)
plt.show()

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(rivals.best_factors(sweep).round(3).to_string())

# %% [markdown] tags=[]
# ## Order of the input: the Pointer Network against Theorem 1
#
# The same instances, their cities listed in `permutation_orderings` random orders: the change of
# the greedy tour length (%), for the Attention Model ($1/\sqrt d$) and the Pointer Network.

# %% tags=[]
spread = rivals.permutation_spread({key: models[key] for key in models if key[0] in ("inv_sqrt_d", "ptrnet")},
                                   n_train, n_max, permutation_instances, permutation_orderings, test_seed)
spread.to_csv(out / "rivals_permutation.csv", index=False, float_format="%.6g")
print(run_checks.check_permutation_invariance(spread))

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(spread.groupby(["model", "n"])[["mean_abs_change_pct", "max_abs_change_pct", "instances_changed"]]
      .mean().round(3).to_string())

# %% [markdown] tags=[]
# ## The receptive-field condition in two dimensions
#
# The RPE paper: a relative bias $b$ extrapolates when the series of $e^{b}$ along the sequence
# converges, and its theoretical receptive field (TRF) is the window that holds $1-\varepsilon$ of
# the series' sum. With $n$ cities uniform in $[-1,1]^2$ and the bias $-m\,s\,r$ ($s$: a coordinate
# factor), a query city at the centre of the square sees on average
#
# $$Z(n) = 1 + \frac{n-1}{4}\int_{[-1,1]^2} e^{-m s r}\,dA \;\approx\; 1 + \frac{(n-1)\,\pi}{2\,(m s)^2}$$
#
# (the right-hand side is the plane, good while $1/(ms)$ is well inside the square). For a fixed $n$
# the series over the cities ordered by distance converges; but its sum grows linearly with $n$,
# because the number of cities within any distance does. The share of the bias's mass within radius
# $R$ does not depend on $n$: the TRF radius is fixed and the **cities inside it grow like $n$**, so
# a biased row spreads over more cities and its entropy grows like $\ln n$: the condition holds along
# no sequence of growing instances. Rescaling by $s(n)=\sqrt{n/N}$ keeps the density in the rescaled
# units at its value for $N$ on a growing square: $Z$ and the TRF in cities then converge as $n$
# grows: they stay at their values for $N$ when the TRF at $N$ lies inside the square (large
# slopes), and grow, boundedly, toward the plane's values when the border cuts it (small slopes).
# EIE's $\lambda(n)$ multiplies the content logits $q\cdot k$ only and is derived for unbiased rows
# (Eq. 6).
#
# Theory (one-dimensional quadratures over the square, query at its centre; PENS's slopes, converted
# to $[-1,1]^2$). Expected cities inside the TRF ($\varepsilon$ = `trf_eps`):

# %% tags=[]
slopes = [float(m) for m in alibi_slopes(8)]
lengths = extrapolation_lengths(n_train, n_max)
trf = receptive_field.theory(lengths, slopes, n_train, eps=trf_eps)
trf.to_csv(out / "rivals_trf.csv", index=False, float_format="%.6g")
print(trf.pivot_table(index=["slope", "rescaled"], columns="n", values="trf_cities").round(1).to_string())

# %% [markdown] tags=[]
# Monte Carlo, as notebook 01 does for Eq. 6: content logits $\lambda(n)\,q\cdot k$ with
# $q, k \sim N(0, I_d)$, plus the bias (slope 0: no bias), for three configurations: the trained
# scale $1/\sqrt d$ with the coordinates as they are, the same with $s(n)=\sqrt{n/N}$, and EIE's
# $\lambda(n)$ with the coordinates as they are.

# %% tags=[]
configurations = {"1/sqrt(d)": (methods.get("inv_sqrt_d").rule(d), False),
                  "1/sqrt(d), rescaled": (methods.get("inv_sqrt_d").rule(d), True),
                  "EIE": (methods.get("eie").rule(d, N=n_train, net=net), False)}
shown_slopes = [0.0, slopes[0], slopes[3], slopes[-1]]
measured = receptive_field.monte_carlo(lengths, shown_slopes, n_train, d, configurations, entropy_radius,
                                       samples=entropy_samples, seed=test_seed)
measured = receptive_field.entropy_growth(measured, n_train)
measured.to_csv(out / "rivals_receptive_field.csv", index=False, float_format="%.6g")
fig = receptive_field_figure(measured, trf[trf.slope.isin(shown_slopes)], n_train)
save_figure(fig, "08_receptive_field", run=run)
plt.show()

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
print(measured.pivot_table(index=["configuration", "slope"], columns="n", values="entropy_change").round(2).to_string())

# %% [markdown] tags=[]
# The trained models' own rows (notebook 07's probe): mean entropy of the encoder's attention rows
# per layer on `probe_instances` test instances, for the distance-bias and RoPE models with and
# without EIE beside the $1/\sqrt d$ model (first seed; machine-dependent, not compared).

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
probed_keys = [k for k in ("inv_sqrt_d", "eie", "dist_bias", "eie_dist_bias", "rope", "eie_rope")
               if k in rules or (k in training_free and methods.get(k).applied_to in rules)]
probed = probes.measured_entropy({key: models[(key, rule_seeds[key][0])] for key in rules if key != "ptrnet"},
                                 extrapolation.bind_methods(probed_keys, d, n_train, net, table), n_train, n_max,
                                 probe_instances)
probed.to_csv(out / "rivals_probe_entropy.csv", index=False, float_format="%.6g")
print(probed.pivot_table(index=["method", "layer"], columns="n", values="measured", sort=False).round(2).to_string())

# %% [markdown] tags=[]
# ## TSPLIB
#
# The 48 symmetric EUC_2D instances of `data/tsplib/` up to `tsplib_max_n` cities, coordinates
# mapped to $[-1,1]^2$ with one scale for both axes; every tour is checked and scored in the
# original units with TSPLIB's rounded distances, so the gap to the optimum is exact. Size bands:
# $n \le 200$, $200 < n \le 1000$, $n > 1000$. Mean over seeds. Where the instances are longer
# than `n_max`, EIE's net and the $\lambda^*$ table are fitted up to the longest instance (EIE fits
# its $\lambda(n)$ over the lengths it will meet, no retraining of the model).

# %% tags=[]
instances = tsplib.load_tsplib(max_n=tsplib_max_n)
tsplib_net, tsplib_table = study.ensure_scales(d, n_train, max(n_max, max(i.n for i in instances)), run=run)
bound = extrapolation.bind_methods(study.method_keys(params), d, n_train, tsplib_net, tsplib_table)
on_tsplib = tsplib.evaluate_tsplib(models, bound, instances, progress=progress, store=study.run_evaluation_store(run))
on_tsplib.to_csv(out / "rivals_tsplib.csv", index=False, float_format="%.4f")
print(f"{len(instances)} TSPLIB instances ({min(i.n for i in instances)}-{max(i.n for i in instances)} cities), "
      f"{len(on_tsplib)} tours: every tour passed the feasibility check.")

# %% tags=[]
# NBVAL_IGNORE_OUTPUT
per_instance_gap, by_band = tsplib.tsplib_tables(on_tsplib)
print("Gap to the optimum (%), mean over the size band and seeds:")
print(comparison.markdown_table(by_band.rename(index=methods.label), "method"))
print("\nPer instance (%):")
print(comparison.markdown_table(per_instance_gap.rename(columns=methods.label), "instance"))

# %% [markdown] tags=[]
# Each method's gap against the instance's size (left) and its gap minus the $1/\sqrt d$ model's on
# the same instance (right), where the differences that the left panel hides show:

# %% tags=[]
fig = tsplib_figure(on_tsplib, n_train)
save_figure(fig, "08_tsplib", run=run)
plt.show()
