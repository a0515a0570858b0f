"""The TSPLIB table of a run's TSP models: the trained models of a preset (default `cpu_paper`'s five
TSP100 seeds, 1/sqrt(d)) with every method of notebook 03 at that preset (for `cpu_paper`: EIE,
lambda*, log_N, rescaled coordinates, EIE with rescaled coordinates) on the 48 TSPLIB instances of
data/tsplib/ (51-2392 cities), greedy, scored exactly (EUC_2D) against the optima; EIE's net and the
lambda* table fitted up to the longest instance, as notebook 08 does. Paired tests (Wilcoxon
signed-rank over the instances of a size band, gaps averaged over the seeds first, Holm-corrected):
EIE against every other method. Before them, the seed-level table: each method against 1/sqrt(d) per
size band, one effect per seed (the mean over the band's instances of the per-instance change of the
tour length), its mean and t interval over seeds.
Run from the repository root:
    .venv/bin/python scripts/tsplib_table.py [--preset presets/cpu_paper.yaml] [--seeds 0 1] [--max-n 2392] [--tables-only]
Seeds: those given, else every seed of the preset whose finished policy is in results/<run>/models/
(a run still training gets the table of its finished models; run it again when more finish).
Writes results/<run>/tsplib.csv (one row per instance, method, seed), tsplib_paired_eie.csv,
tsplib_table.md and figures/tsplib_gaps_<run>.png (with --max-n, files named tsplib_upto<max-n>*).
"""

import argparse
import time

import pandas as pd
import torch

from eie import comparison, experiments, extrapolation, methods, study, tsplib
from eie.paths import repo_root, results_dir
from eie.plotting import apply_style, save_figure, tsplib_figure
from eie.seed_level import describe

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--preset", default="presets/cpu_paper.yaml", help="the run's preset (default: %(default)s)")
parser.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="these seeds only (default: every seed of the preset whose finished policy is exported)")
parser.add_argument("--max-n", type=int, default=None,
                    help="only instances up to this many cities (default: all 48); the files get the suffix _upto<max-n>")
parser.add_argument("--progress", action="store_true")
parser.add_argument("--tables-only", action="store_true",
                    help="decode nothing: write the tables and the figure again from the csv of an earlier run")
args = parser.parse_args()

torch.set_grad_enabled(False)
try:
    preset = experiments.load("03_train_tsp", args.preset)
except (ValueError, FileNotFoundError) as error:
    parser.error(str(error))
run, n_train = preset["run"], preset["n_train"]
try:
    out = results_dir(run, create=False)  # a run with nothing trained has no folder, and asking creates none
except FileNotFoundError as error:
    parser.error(f"{error} (its TSP models: python -m eie.worker {args.preset} 03_train_tsp)")
stem = "tsplib" if args.max_n is None else f"tsplib_upto{args.max_n}"  # a subset never overwrites the full table
if args.tables_only:
    results = pd.read_csv(out / f"{stem}.csv")
else:
    unknown = sorted(set(args.seeds or []) - set(preset["seeds"]))
    if unknown:
        parser.error(f"{args.preset} trains seeds {preset['seeds']}, not {unknown}; give --seeds among those")
    names = {(rule, seed): study.model_name("tsp", rule, n_train, seed) for rule in preset["rules"]
             for seed in args.seeds or preset["seeds"]}
    exported = {key: name for key, name in names.items() if (study.models_folder(run) / f"{name}.pt").is_file()}
    if args.seeds is not None and len(exported) < len(names):
        parser.error(f"no finished policy in {study.models_folder(run)} for "
                     f"{sorted(set(names.values()) - set(exported.values()))}: finish their training and export them "
                     f"(python -m eie.worker {args.preset} 03_train_tsp, then --save-carry), or leave out --seeds")
    if not exported:
        parser.error(f"no finished TSP policy of run {run!r} in {study.models_folder(run)} yet: train and export "
                     f"one first (python -m eie.worker {args.preset} 03_train_tsp, then --save-carry)")
    names = exported
    print(f"{run}: {len(names)} models, seeds {sorted({seed for _, seed in names})}", flush=True)
    loaded = study.load_policies(names.values(), run=run)
    models = {key: loaded[name] for key, name in names.items()}
    d = next(iter(models.values())).config.head_dim

    instances = tsplib.load_tsplib(max_n=args.max_n)
    longest = max(instance.n for instance in instances)
    net, table = study.ensure_scales(d, n_train, max(preset["n_max"], longest), run=run)
    bound = extrapolation.bind_methods(study.method_keys(preset), d, n_train, net, table)
    started = time.perf_counter()
    results = tsplib.evaluate_tsplib(models, bound, instances, progress=args.progress)
    print(f"{len(instances)} TSPLIB instances ({min(i.n for i in instances)}-{longest} cities), {len(results)} tours "
          f"in {(time.perf_counter() - started) / 60:.1f} min: every tour passed the feasibility check.")
    results.to_csv(out / f"{stem}.csv", index=False, float_format="%.4f")
gaps = {}  # {(band, method, seed, 0): gaps of its instances}, each band and all 48 together
for row in results.itertuples():  # instances in the same order for every method and seed
    for band in (row.band, "all"):
        gaps.setdefault((band, row.method, row.seed, 0), []).append(row.gap_pct)
paired = comparison.paired_comparison(gaps, method="eie")
paired = paired.drop(columns="n").rename(columns={"setting": "band", "diff": "diff_gap_pp"})
band_order = [label for _, label in tsplib.BANDS] + ["all"]
paired = paired.sort_values("band", key=lambda band: band.map(band_order.index), kind="stable")
paired["other"] = paired.other.map(methods.label)
paired.to_csv(out / f"{stem}_paired_eie.csv", index=False, float_format="%.6g")

per_instance, by_band = tsplib.tsplib_tables(results)
counts = results.drop_duplicates("name").band.value_counts()
per_seed = results.groupby(["method", "seed", "band"], sort=False).gap_pct.mean().unstack("band")
per_seed["all"] = results.groupby(["method", "seed"], sort=False).gap_pct.mean()
spread = per_seed.groupby("method", sort=False).std(ddof=1)  # over the seeds
cells = by_band.copy().astype(object)
for method in by_band.index:
    for band in by_band.columns:
        spread_text = "–" if pd.isna(spread.loc[method, band]) else f"{spread.loc[method, band]:.2f}"  # one seed: none
        cells.loc[method, band] = f"{by_band.loc[method, band]:.2f} ({spread_text})"
cells.columns = [f"{band} ({counts[band] if band in counts else len(per_instance)})" for band in by_band.columns]
shown = paired.set_index("band").round({"diff_gap_pp": 2, "ci_low": 2, "ci_high": 2})
shown["p"], shown["p_holm"] = paired.p.map("{:.2g}".format).values, paired.p_holm.map("{:.2g}".format).values
seed_level = tsplib.seed_level_by_band(results)
text = ["Each method against 1/sqrt(d), seed by seed: a seed's effect is the mean over the band's instances of the "
        "per-instance change of the tour length (%); mean [95 % t interval over seeds], seeds better and worse:", "",
        "| band | method | per seed (%) | seed level |", "|---|---|---|---|"]
text += [f"| {row['band']} | {methods.label(row['method'])} | {', '.join(f'{v:+.2f}' for v in row['per_seed'])} | "
         f"{describe(row)} |" for row in seed_level.to_dict("records")]
text += ["", "Gap to the optimum (%), mean over the instances of the size band (how many in brackets) and the seeds "
        "(" + ", ".join(map(str, sorted(results.seed.unique()))) + "); in brackets the standard deviation over the seeds of the band's mean:",
        "", comparison.markdown_table(cells.rename(index=methods.label), "method"), "",
        "EIE against every other method, paired by instance (gap in percentage points, EIE minus other, gaps averaged "
        "over the seeds first; 95 % t interval; Wilcoxon signed-rank, Holm over all rows):", "",
        comparison.markdown_table(shown, "band"), "",
        "Per instance (%), mean over the seeds:", "",
        comparison.markdown_table(per_instance.rename(columns=methods.label), "instance")]
apply_style()
figure = save_figure(tsplib_figure(results, n_train), stem.replace("tsplib", "tsplib_gaps"), run=run)
text += ["", f"Figure: {figure.relative_to(repo_root())}"]
(out / f"{stem}_table.md").write_text("\n".join(text) + "\n")
print("\n".join(text))
