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
# # 09 · What the study found
#
# The verdict, read from the committed result files of the runs it rests on (`eie.findings.VERDICT_RUNS`):
# the paper's own setting for TSP and CVRP (N = 100 → 1600, `results/cpu_paper/`) and the well-trained
# CPU-scale runs (N = 20 → 320, `results/cpu_long_v2/`).
#
# **The unit of replication is the trained model.** For each seed, a method's effect is the change of
# the objective against the 1/√d model *of the same seed* at the same test length (%); the tables give
# the mean over seeds with its 95 % t interval, how many seeds are better and worse, the p-value of
# "no effect" over seeds, the two one-sided tests (TOST) of equivalence within ±1 %, and the paper's
# own effect. With three seeds the t interval is wide (4.3 standard errors): "no difference" is said
# only where TOST rejects. The instance-level paired tests of notebook 06 are secondary: they say how
# consistent a difference is over test instances for these particular models, not over training runs.
#
# Writes `figures/verdict.png`. The README's findings section holds the same tables
# (`python -m eie.findings --write` regenerates them, `tests/test_findings.py` checks they agree).

# %% tags=["parameters"]
preset = ""  # type: str  a preset file (presets/NAME.yaml) whose values replace the defaults; every setting: python -m eie.experiments 09_findings
run = None  # type: str  None: the preset's, else 'default'; figures/verdict.png for 'default', figures/verdict_<run>.png otherwise

# %% tags=[]
from IPython.display import Markdown, display

from eie import findings
from eie.experiments import configure
from eie.paths import repo_root
from eie.plotting import apply_style, save_figure

globals().update(configure("09_findings", globals()))  # the experiment: every setting checked before any compute
apply_style()

# %% [markdown] tags=[]
# ## The tables: each method against 1/√d at 16N, seed by seed

# %% tags=[]
tables = findings.findings_markdown()
display(Markdown(tables))

# %% [markdown] tags=[]
# ## The verdict figure
#
# Left: each training-free rule (and the retrained ones of the CPU-scale runs) against the 1/√d model of
# the same seed, at every test length; points are seeds, bars the mean and its 95 % t interval over
# seeds; open diamonds the paper's own numbers (N = 100 only). EIE is the thick red line, drawn on top.
# Right: coordinate rescaling, whose losses are an order of magnitude larger, on its own axis.

# %% tags=[]
fig = findings.verdict_figure()
print(save_figure(fig, "verdict", run).relative_to(repo_root()))

# %% [markdown] tags=[]
# ## The README agrees with the files

# %% tags=[]
in_readme = findings.readme_block((repo_root() / "README.md").read_text())
print("README findings block matches the result files:", in_readme == tables)
