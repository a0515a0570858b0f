# Trains the models of results/cpu_long CVRP (same configuration the notebook 04 call builds).
# Several workers may run at once: each takes a model nobody holds (lock file), trains it to the end.
import os, sys, torch
torch.set_num_threads(1)
from eie import study
from eie.paths import results_dir
LR = {10: 1e-4, 15: 5e-5, 20: 5e-5}
locks = results_dir("cpu_long") / "locks"
locks.mkdir(exist_ok=True)
jobs = [(cap, rule, seed) for cap in (10, 15, 20) for seed in (0, 1) for rule in ("inv_sqrt_d", "ln_d", "ln_sqrt_d")]
if sys.argv[1:] == ["reverse"]:
    jobs.reverse()
for cap, rule, seed in jobs:
    try:
        fd = os.open(locks / f"C{cap}_{rule}_{seed}", os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        continue
    study.train_models([rule], [seed], run="cpu_long", device="cpu", progress=False,
                       tag=f"_C{cap}", problem="cvrp", problem_options={"capacity": cap, "size_counts_depot": False},
                       n_train=20, epochs=80, steps_per_epoch=10, batch_size=128, lr=LR[cap], max_grad_norm=1.0,
                       baseline_eval_size=1024, lr_decay_on_p=False, sites=("encoder", "glimpse"), n_mode="instance")
    print("done", cap, rule, seed, flush=True)
