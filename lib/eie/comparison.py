"""Reading the extrapolation results back and comparing methods the way notebook 06 reports them.

- `load_instance_objectives`: the per-instance objectives a training notebook saved (one array of
  test instances per setting, method, seed and n);
- `paired_comparison`: one method (EIE by default) against each other method over the same test
  instances: per instance, each method's objective averaged over the seeds, then the mean
  difference with a 95 % t interval and a two-sided Wilcoxon signed-rank p-value, Holm-corrected
  over all the comparisons of one table;
- `table_by_method`: methods by n, 'mean (std over seeds)', the best of each column marked;
- `markdown_table`: a table (for example `table_by_method(..., mark="**{}**")`, the paper's
  layout with the best mean of each column in bold) as markdown.

The paired test answers "on these instances, with these trained models, is the difference
systematic?"; it does not see the variation between training seeds (two or three seeds are too few
to test over), which the (std) of the tables shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from . import methods
from .experiments import training_notebook
from .methods import label
from .paper import TABLE_NUMBER, paper_rows, paper_table
from .problems import PROBLEMS, make_problem


def load_instance_objectives(path) -> dict:
    """{(setting, method, seed, n): objectives} from a `*_instance_costs.npz` / `*_load_rates.npz`
    (keys 'setting/method|seed|n', or 'method|seed|n' with setting '')."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no per-instance results at {path}: run the training notebook for this run first")
    out = {}
    with np.load(path) as data:
        for key in data.files:
            try:
                name, seed, n = key.split("|")
                setting, _, method = name.rpartition("/")
                out[(setting, method, int(seed), int(n))] = data[key]
            except ValueError as error:
                raise ValueError(f"{path}: entry {key!r} is not 'setting/method|seed|n'") from error
    return out


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (family-wise error control, any dependence)."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def paired_comparison(objectives: dict, method: str = "eie", maximise: bool = False, alpha: float = 0.05,
                      others=None) -> pd.DataFrame:
    """`method` against every other method (or `others`) at each setting and n, paired by instance.

    Columns: setting, n, other, instances, diff (mean over instances of method minus other, seeds
    averaged first), ci_low, ci_high (95 % t interval of diff), p (Wilcoxon signed-rank), p_holm
    (over all rows), verdict ('better' / 'worse' for `method` when p_holm < alpha, else 'n.s.';
    lower objective is better unless `maximise`).
    """
    runs = {}  # (setting, n) -> {method: [objectives of each seed]}
    for (setting, name, _, n), values in objectives.items():
        runs.setdefault((setting, n), {}).setdefault(name, []).append(np.asarray(values, dtype=np.float64))
    rows = []
    for (setting, n), by_method in sorted(runs.items()):
        if method not in by_method:
            continue
        mine = np.mean(by_method[method], axis=0)
        for other in sorted(by_method):
            if other == method or (others is not None and other not in others):
                continue
            theirs = np.mean(by_method[other], axis=0)
            if theirs.shape != mine.shape:
                raise ValueError(f"{setting or 'results'} n={n}: {method} and {other} were evaluated on "
                                 f"different numbers of instances ({mine.shape[0]} vs {theirs.shape[0]})")
            diff = mine - theirs
            half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else np.nan
            p = float(stats.wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0
            rows.append({"setting": setting, "n": n, "other": other, "instances": len(diff), "diff": diff.mean(),
                         "ci_low": diff.mean() - half, "ci_high": diff.mean() + half, "p": p})
    frame = pd.DataFrame(rows, columns=["setting", "n", "other", "instances", "diff", "ci_low", "ci_high", "p"])
    frame["p_holm"] = holm(frame.p) if len(frame) else []
    better = frame["diff"] > 0 if maximise else frame["diff"] < 0
    frame["verdict"] = np.where(frame.p_holm >= alpha, "n.s.", np.where(better, "better", "worse"))
    return frame


def verdict_sentences(problem: str, results: pd.DataFrame, paired: pd.DataFrame, method: str = "eie",
                      base: str = "inv_sqrt_d") -> list[str]:
    """One plain sentence per setting, at the longest test length: does `method` (EIE, on the model
    trained with `base`) beat `base` there, by how much (% of `base`'s mean objective, seeds
    averaged) and with what paired significance (the row of `paired`, from `paired_comparison`, so
    the Holm family is that table's); which method is best there; and each method's gap to the
    reference solver. Every number is read from the arguments."""

    spec = make_problem(problem)
    sentences = []
    for setting in dict.fromkeys(results.setting):
        part = results[(results.setting == setting) & (results.method != "reference")]
        n_train, n = int(part.n.min()), int(part.n.max())
        at_n = part[part.n == n].groupby("method", sort=False).agg(objective=("objective", "mean"),
                                                                   gap=("gap_pct", "mean"))
        name = f"{spec.name.upper()}{' ' + setting if setting else ''}"
        head = f"{name}, trained at N = {n_train}, tested at n = {n} ({n // n_train}×N): "
        row = paired[(paired.setting == setting) & (paired.n == n) & (paired.other == base)]
        if method in at_n.index and base in at_n.index and len(row) == 1:
            row = row.iloc[0]
            change = 100 * row["diff"] / abs(at_n.objective[base])  # the paired mean difference, unrounded
            better = change > 0 if spec.maximise else change < 0
            relation = "as good as" if change == 0 else f"{abs(change):.2f} % {'better' if better else 'worse'} than"
            head += (f"{label(method)} without retraining is {relation} the {label(base)} model "
                     f"({spec.objective_name} {at_n.objective[method]:.4g} against "
                     f"{at_n.objective[base]:.4g}; paired over {int(row.instances)} instances, difference "
                     f"{row['diff']:+.3g} [{row.ci_low:+.3g}, {row.ci_high:+.3g}], Holm-adjusted Wilcoxon "
                     f"p = {row.p_holm:.2g}: {'significant' if row.verdict != 'n.s.' else 'not significant'}). ")
            head += _per_seed_clause(part[part.n == n], method, base, spec.maximise)
        elif method in at_n.index and base in at_n.index:
            head += f"{label(method)} and {label(base)} have no paired comparison at n = {n} in `paired`. "
        else:
            head += f"{label(method)} or {label(base)} was not evaluated here. "
        best = at_n.objective.idxmax() if spec.maximise else at_n.objective.idxmin()
        head += f"Best at n = {n}: {label(best)} ({at_n.objective[best]:.4g}). "
        if at_n.gap.notna().any():
            gaps = at_n.gap.dropna().sort_values()
            head += (f"Gap to {spec.reference_name} at n = {n} (% worse): "
                     + ", ".join(f"{label(m)} {g:+.1f}" for m, g in gaps.items()) + ".")
        sentences.append(head)
    return sentences


def _per_seed_clause(at_n: pd.DataFrame, method: str, base: str, maximise: bool) -> str:
    """'Per seed: ...' — `method` against `base` on each seed's own model (% of that seed's `base`
    objective) and how many seeds agree in sign; '' with fewer than two seeds that have both."""

    by_seed = at_n.pivot_table(index="seed", columns="method", values="objective")
    if method not in by_seed or base not in by_seed:
        return ""
    change = (100 * (by_seed[method] - by_seed[base]) / by_seed[base].abs()).dropna()
    if len(change) < 2:
        return ""
    better = int((change > 0).sum() if maximise else (change < 0).sum())
    worse = int((change < 0).sum() if maximise else (change > 0).sum())
    return (f"Per seed ({', '.join(f'{int(seed)}' for seed in change.index)}): "
            f"{', '.join(f'{value:+.2f}' for value in change)} % of the {label(base)} model's objective; "
            f"{label(method)} better on {better}, worse on {worse} of {len(change)} seeds. ")


def markdown_table(frame: pd.DataFrame, index_name: str = "") -> str:
    """A GitHub-flavoured markdown table of `frame` (index as the first column)."""
    header = [index_name or (frame.index.name or "")] + [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in frame.iterrows():
        lines.append("| " + " | ".join([str(index)] + [str(v) for v in row]) + " |")
    return "\n".join(lines)


class _PerProblem(Mapping):
    """{problem: value(problem)} over the problems registered when it is read (a problem registered
    after import counts)."""

    def __init__(self, value):
        self._value = value

    def __getitem__(self, name):
        if name not in PROBLEMS:
            raise KeyError(name)
        return self._value(name)

    def __iter__(self):
        return iter(PROBLEMS)

    def __len__(self):
        return len(PROBLEMS)


# The files a training notebook writes for each problem: (results table, per-instance objectives).
RESULT_FILES = _PerProblem(lambda name: make_problem(name).result_files)
# The notebook that writes them.
RESULT_NOTEBOOKS = _PerProblem(training_notebook)


def load_problem_results(folder, problem: str):
    """(results table, per-instance objectives) of `problem` in the results folder, or None when the
    training notebook has not written them there."""
    if problem not in RESULT_FILES:
        raise ValueError(f"unknown problem {problem!r}; choose from {sorted(RESULT_FILES)}")
    table, instances = (Path(folder) / name for name in RESULT_FILES[problem])
    if not table.is_file():
        return None
    results = pd.read_csv(table, keep_default_na=False, na_values=[""], dtype={"setting": str})
    results["setting"] = results["setting"].fillna("")
    return results, load_instance_objectives(instances)


def load_run_results(folder, problems=None) -> tuple[dict, list[str]]:
    """({problem: (results table, per-instance objectives)}, notes on the problems not found) for a
    finished run's folder (every registered problem unless `problems` names some). Raises FileNotFoundError, naming the notebooks to run, when the folder
    holds none of them: an empty or mistyped run is an error, not a report with no tables."""
    folder = Path(folder)
    loaded, missing = {}, []
    for problem in (tuple(RESULT_FILES) if problems is None else problems):
        found = load_problem_results(folder, problem)
        if found is None:
            missing.append(f"{problem}: no {RESULT_FILES[problem][0]} in {folder} (run notebooks/"
                           f"{RESULT_NOTEBOOKS[problem]}.ipynb with -p run {folder.name}); skipped")
        else:
            loaded[problem] = found
    if not loaded:
        raise FileNotFoundError(f"{folder} holds no results of the training notebooks: " + "; ".join(missing))
    return loaded, missing


def problem_tables(problem: str, results: pd.DataFrame, objectives: dict, source: str = "") -> str:
    """The markdown tables of notebook 06 for one problem: per setting our table (mean (std over
    seeds), best in bold), the gap to the reference, the paper's table where it has one, and both
    relative to the 1/sqrt(d) model at the same n/N (ours / paper)."""

    spec = make_problem(problem)
    number = TABLE_NUMBER.get(problem, "-")
    labelled = lambda frame: frame.rename(index=methods.label)  # noqa: E731
    fewest, most = results[results.seed >= 0].groupby("method").seed.nunique().agg(["min", "max"])
    instances = len(next(iter(objectives.values())))
    seed_count = f"{most} seed{'s' if most != 1 else ''}" if fewest == most else f"{fewest}-{most} seeds per method"
    lines = [f"## Table {number}: {problem}, {spec.objective_name} ({source + ', ' if source else ''}{seed_count}, "
             f"{instances} test instances per n)"]
    for setting in dict.fromkeys(results.setting):
        part = results[results.setting == setting]
        lines += ["", f"### {setting or problem}", "",
                  markdown_table(labelled(table_by_method(part, maximise=spec.maximise, mark="**{}**")), "method"),
                  "", f"Gap to {spec.reference_name} (%):", "",
                  markdown_table(labelled(table_by_method(part, "gap_pct", digits=1, mark="**{}**")), "method"),
                  "", f"{spec.reference_name}, mean over the instances it solved: " + reference_means(part)]
        rows = paper_rows(problem, setting)
        if rows is not None:
            lines += ["", f"Paper, Table {number} (N = 100):", "", markdown_table(labelled(paper_table(rows)), "method"),
                      "", "Relative to the 1/sqrt(d) model at the same n/N (%), ours / paper:", "",
                      markdown_table(labelled(side_by_side(relative_to_base(part), paper_relative(rows))), "method")]
    return "\n".join(lines)


def reference_means(results: pd.DataFrame, digits: int = 2) -> str:
    """'n = 20: 3.84, n = 40: 5.31, ...' for the reference rows of one setting's results."""
    reference = results[results.method == "reference"]
    return ", ".join(f"n = {n}: {v:.{digits}f}" for n, v in zip(reference.n, reference.objective, strict=True))


def relative_to_base(results: pd.DataFrame, base: str = "inv_sqrt_d") -> pd.DataFrame:
    """Methods by extrapolation factor n / N: 100 (mean objective / mean objective of `base` - 1),
    means over seeds (N = the smallest n of the table). Lets runs with different N be compared."""
    means = results[results.method != "reference"].groupby(["method", "n"], sort=False).objective.mean().unstack("n")
    relative = 100 * (means / means.loc[base] - 1)
    relative.columns = [f"x{n // min(means.columns)}" for n in means.columns]
    return relative


def paper_relative(rows: dict, base: str = "inv_sqrt_d") -> pd.DataFrame:
    """`relative_to_base` for one of the paper's tables (`eie.paper`)."""
    n = rows["n"]
    means = pd.DataFrame({key: [m for m, _ in values] for key, values in rows.items() if key != "n"}, index=n).T
    relative = 100 * (means / means.loc[base] - 1)
    relative.columns = [f"x{v // min(n)}" for v in n]
    return relative


def side_by_side(ours: pd.DataFrame, theirs: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Cells 'ours / theirs' on the rows and columns of `ours` ('-' where `theirs` has no value)."""
    theirs = theirs.reindex(index=ours.index, columns=ours.columns)
    fmt = lambda v: "-" if pd.isna(v) else f"{v:.{digits}f}"  # noqa: E731
    return pd.DataFrame([[f"{fmt(a)} / {fmt(b)}" for a, b in zip(ours.loc[i], theirs.loc[i], strict=True)] for i in ours.index],
                        index=ours.index, columns=ours.columns)


def table_by_method(results: pd.DataFrame, value: str = "objective", digits: int = 2,
                    maximise: bool = False, mark: str = "*{}") -> pd.DataFrame:
    """Methods by n, each cell 'mean (std over seeds)'; the best mean per column (the lowest, or the
    highest with `maximise`) formatted with `mark` ('*{}' by default, '**{}**' for markdown bold)."""
    stats = results[results.method != "reference"].groupby(["method", "n"], sort=False)[value].agg(["mean", "std"])
    means = stats["mean"].unstack("n")
    cells = stats.apply(lambda r: f"{r['mean']:.{digits}f}" + ("" if np.isnan(r["std"]) else f" ({r['std']:.{digits}f})"),
                        axis=1).unstack("n")
    best = means.idxmax() if maximise else means.idxmin()
    for n, method in best.items():
        cells.loc[method, n] = mark.format(cells.loc[method, n])
    return cells.loc[means.index]
