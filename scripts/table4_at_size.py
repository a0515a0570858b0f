"""Table 4 at the paper's own size: greedy CVRP decoding of 16 384 instances at n = 1600 by a run's
1/sqrt(d) model, with its own scale and with EIE, timed on this machine beside the paper's 8.18 h.

    python scripts/table4_at_size.py presets/cpu_paper.yaml [--n 1600] [--instances 16384] [--block 512]
        [--chunk 16] [--seed 0] [--setting C10] [--device cpu]

The instances (the run's instance distribution at n, drawn block by block, each block from its own
seeded generator) are decoded in blocks of --block, each block once per method, the two methods in
alternating order from block to block so that a busier stretch of the machine falls on both. The
instances are drawn before the clock starts; each timed region holds the method's scale (the EIE
net's evaluation included), decoding and the feasibility check of every solution, as notebook 04's
Table 4 cell does. Each block's seconds and mean objective per method are appended to
results/<run>/table4_at_size.csv as it ends, so an interrupted run resumes at the first block the csv
lacks (the csv records n, the model, the block size, the chunk and the test seed; a run asking for
others is refused rather than mixed in). The table (results/<run>/table4_at_size.md): hours per
method as the sum over blocks, EIE's extra time, the median over blocks of the ratio of the two
methods' seconds, and the paper's hours.
Timings depend on the machine and on what else runs on it: the csv records the torch thread count
and the machine's load average at each block. `--device cuda` times the decoding on a GPU (each
timed region ends when the GPU has finished); its blocks go to table4_at_size_cuda.csv and .md, so
that the two machines' timings are never mixed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, extrapolation, study  # noqa: E402
from eie.comparison import markdown_table  # noqa: E402
from eie.evaluation import greedy_costs  # noqa: E402
from eie.methods import label  # noqa: E402
from eie.paper import PAPER_CVRP_TIME_H  # noqa: E402

METHODS = ("inv_sqrt_d", "eie")
COLUMNS = ["block", "method", "instances", "seconds", "objective", "threads", "load_1min"]
# what the csv's blocks were measured with: a resumed run must ask for the same
SETUP = ["n", "model", "block_size", "chunk", "test_seed"]


def block_instances(problem, n: int, block: int, size: int, test_seed: int) -> dict:
    """Block `block` of the timed instances: `size` instances at n from a generator seeded by
    (test_seed, n, block), so every block, and every rerun of it, draws the same instances."""
    generator = torch.Generator().manual_seed((test_seed * 1_000_003 + n) * 100_003 + block)
    return problem.generate(size, n, generator)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on `device` (a GPU runs asynchronously; a CPU has nothing to wait for)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def read_blocks(csv: Path, setup: dict) -> pd.DataFrame:
    """The blocks `csv` holds (none without it); refused if they were measured with another setup."""
    if not csv.is_file():
        return pd.DataFrame(columns=SETUP + COLUMNS)
    done = pd.read_csv(csv, dtype={"model": str}, keep_default_na=False)
    held = {key: done[key].iloc[0] for key in SETUP} if len(done) else setup
    differs = [f"{key} {held[key]} (asked {setup[key]})" for key in SETUP if str(held[key]) != str(setup[key])]
    if differs:
        raise SystemExit(f"{csv} holds blocks measured with {', '.join(differs)}: move it away to time this setup")
    return done


def time_blocks(model, methods, n: int, blocks: int, size: int, chunk: int, test_seed: int, csv: Path,
                model_name: str = "") -> pd.DataFrame:
    """Decode and time every block the csv lacks (see the module's docstring); returns the csv's rows
    of blocks 0 .. blocks - 1. Both methods decode a few instances first, untimed, so that no block
    pays for the first call's one-time costs."""
    setup = {"n": n, "model": model_name, "block_size": size, "chunk": chunk, "test_seed": test_seed}
    done = read_blocks(csv, setup)
    todo = [b for b in range(blocks) if b not in set(done.block)]
    if todo:
        warm_up = block_instances(model.problem, n, todo[0], min(size, chunk), test_seed)
        for method in methods:
            with torch.no_grad():
                greedy_costs(model, warm_up, method, chunk=chunk)
    for block in tqdm(todo, desc=f"n = {n}, blocks of {size}", mininterval=5.0):
        instances = block_instances(model.problem, n, block, size, test_seed)
        rows = []
        for method in (methods if block % 2 == 0 else methods[::-1]):
            start = time.perf_counter()
            with torch.no_grad():
                costs = greedy_costs(model, instances, method, chunk=chunk)
            synchronize(costs.device)
            seconds = time.perf_counter() - start
            rows.append({**setup, "block": block, "method": method.key, "instances": size, "seconds": seconds,
                         "objective": float(costs.mean()), "threads": torch.get_num_threads(),
                         "load_1min": os.getloadavg()[0]})
        done = pd.concat([done, pd.DataFrame(rows)], ignore_index=True) if len(done) else pd.DataFrame(rows)
        partial = csv.with_name(csv.name + ".partial")
        done.to_csv(partial, index=False, float_format="%.6g")
        partial.replace(csv)
    return done[done.block < blocks]


def table(done: pd.DataFrame, n: int, base: str = "inv_sqrt_d", method: str = "eie") -> str:
    """Table 4's row at n from the timed blocks (both methods present in every block counted)."""
    wide = done.pivot(index="block", columns="method", values="seconds").dropna()
    objective = done.pivot(index="block", columns="method", values="objective").loc[wide.index]
    size = int(done.instances.iloc[0])
    cells = {
        "instances timed": f"{len(wide) * size}",
        f"{label(base)} (h)": f"{wide[base].sum() / 3600:.3f}", f"{label(method)} (h)": f"{wide[method].sum() / 3600:.3f}",
        f"{label(method)} - {label(base)} (s)": f"{wide[method].sum() - wide[base].sum():+.1f}",
        "median ratio over blocks": f"{(wide[method] / wide[base]).median():.3f}",
        f"mean cost, {label(base)}": f"{objective[base].mean():.3f}",
        f"mean cost, {label(method)}": f"{objective[method].mean():.3f}",
        "paper, Table 4 (h)": f"{PAPER_CVRP_TIME_H.get(n, float('nan'))}"}
    row = pd.DataFrame([cells], index=pd.Index([n], name="n"))
    threads = sorted(set(done.threads.astype(int)))
    return "\n".join([
        f"# Table 4 at size: greedy CVRP decoding at n = {n}", "",
        f"{len(wide)} blocks of {size} instances; torch threads {threads}; 1-minute load average over the "
        f"blocks {done.load_1min.min():.1f}-{done.load_1min.max():.1f} (a load above the thread count "
        "means other work shared the cores).", "",
        markdown_table(row, "n")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--n", type=int, default=1600)
    parser.add_argument("--instances", type=int, default=16384)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--chunk", type=int, default=16, help="instances decoded at once")
    parser.add_argument("--seed", type=int, default=0, help="the 1/sqrt(d) model's training seed")
    parser.add_argument("--setting", default=None, help="the CVRP setting (default: the run's first capacity)")
    parser.add_argument("--device", default="cpu", help="where to decode: cpu, or cuda (timed into table4_at_size_cuda.csv)")
    args = parser.parse_args()
    for name in ("n", "instances", "block", "chunk"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.instances % args.block:
        parser.error(f"--instances ({args.instances}) must be a multiple of --block ({args.block})")
    params = experiments.load("04_train_cvrp", args.preset)
    run, n_train = params["run"], params["n_train"]
    setups = study.training_setups("04_train_cvrp", params)
    setup = setups[0] if args.setting is None else next((s for s in setups if s["setting"] == args.setting), None)
    if setup is None:
        parser.error(f"--setting {args.setting!r} is not one of the run's: {', '.join(s['setting'] for s in setups)}")
    name = study.model_name("cvrp", "inv_sqrt_d", n_train, args.seed, setup["tag"])
    if not (study.models_folder(run) / f"{name}.pt").is_file():
        parser.error(f"no exported policy {name} in results/{run}/models/: train and export the run first")
    if not n_train < args.n <= params["n_max"]:
        parser.error(f"--n must lie above the training length and within the run's n_max ({n_train} < n <= "
                     f"{params['n_max']}), where its EIE net was fitted; got {args.n}")
    if args.device != "cpu" and not (args.device.startswith("cuda") and torch.cuda.is_available()):
        parser.error(f"--device {args.device!r}: only cpu, or cuda where a CUDA GPU is visible, is timed here")
    model = study.load_policies([name], run=run, device=args.device)[name]
    d = model.config.head_dim
    net, scale_table = study.ensure_scales(d, n_train, params["n_max"], run=run)
    methods = extrapolation.bind_methods(list(METHODS), d, n_train, net, scale_table)
    csv = study.results_dir(run) / ("table4_at_size.csv" if args.device == "cpu" else "table4_at_size_cuda.csv")
    done = time_blocks(model, methods, args.n, args.instances // args.block, args.block, args.chunk,
                       params["test_seed"], csv, model_name=name)
    text = table(done, args.n)
    if args.device != "cpu":
        text += f"\n\nDecoded on {torch.cuda.get_device_name(torch.device(args.device))}."
    csv.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
