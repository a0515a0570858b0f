"""Does EIE's sign depend on how the model decodes? Every method under every decoding mode, against
1/sqrt(d) under the same mode, on a run's exported models (`eie.decoding_modes`).

    python scripts/decoding_modes.py presets/cpu_paper.yaml 03_train_tsp [--seeds 0 1 2] [--lengths 200 400 800]
        [--modes greedy sample16 augment8] [--methods inv_sqrt_d eie log_N] [--factors 1.75] [--instances 256]

Modes (`eie.decoding`): greedy; best of K sampled solutions (seeded, so reruns reproduce); greedy
over the 8 symmetries of the square. `--factors` adds a constant lambda = f/sqrt(d) (the lambda
sweep's best factor, say). The test instances are the first `--instances` of the run's own test set
at each n. Each finished (setting, seed, n, mode) is appended to results/<run>/decoding_modes.csv as
it ends, its per-instance objectives to decoding_modes_costs.npz, so an interrupted run resumes
where it stopped (a group in the csv whose objectives were not kept is decoded again and must give
the same means). Then results/<run>/decoding_modes.md gets each mode's gap to the run's reference
solver (on the instances it solved; read from the run's evaluation store, or solved there with
--references first) and the seed-level table of each method against 1/sqrt(d) per mode and n, and
figures/decoding_modes_<run>.png the figure (`eie.plotting.decoding_modes_figure`; notebook 10 draws
it too).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, plotting, study  # noqa: E402
from eie.decoding import parse_mode  # noqa: E402
from eie.decoding_modes import costs_path, measure, mode_gaps, modes_markdown, read_costs, read_modes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("notebook")
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--lengths", type=int, nargs="+", default=None, help="default: 2N, 4N, 8N")
    parser.add_argument("--modes", nargs="+", default=["greedy", "sample16", "augment8"])
    parser.add_argument("--methods", nargs="+", default=["inv_sqrt_d", "eie", "log_N"])
    parser.add_argument("--factors", type=float, nargs="*", default=[])
    parser.add_argument("--instances", type=int, default=256)
    parser.add_argument("--device", default="cpu", help="where the models decode (cpu, cuda); a GPU's sampled "
                        "draws differ from a CPU's, so a group is reproduced on the kind of device it was decoded on")
    args = parser.parse_args()
    for mode in args.modes:
        parse_mode(mode)
    if "inv_sqrt_d" not in args.methods:
        parser.error("--methods must include inv_sqrt_d (every effect is against it)")
    params = experiments.load(args.notebook, args.preset)
    seeds = args.seeds if args.seeds is not None else params["seeds"]
    lengths = args.lengths or [2 * params["n_train"], 4 * params["n_train"], 8 * params["n_train"]]
    csv = measure(params, args.notebook, seeds, lengths, args.modes, args.methods, args.factors, args.instances,
                  device=args.device)
    frame = read_modes(csv)
    references = {}
    for problem in frame.problem.unique():  # every problem the table holds, not only this notebook's
        notebook = experiments.training_notebook(problem)
        by_setting = study.compute_references(notebook, experiments.load(notebook, args.preset))
        references.update({(problem, setting): by_n for setting, by_n in by_setting.items()})
    gaps = mode_gaps(frame, read_costs(costs_path(csv)), references)
    text = modes_markdown(frame, source=csv.name, gaps=gaps)
    csv.with_suffix(".md").write_text(text + "\n")
    print(text)
    plotting.apply_style()
    print(f"figure: {plotting.save_figure(plotting.decoding_modes_figure(frame), 'decoding_modes', params['run'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
