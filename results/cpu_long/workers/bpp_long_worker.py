# Trains the models of results/cpu_long BPP (same configuration the notebook 05 call builds).
# Several workers may run at once: each takes a model nobody holds (lock file), trains it to the end.
import os
import torch
torch.set_num_threads(1)
from eie import study
from eie.paths import results_dir
locks = results_dir("cpu_long") / "locks"
locks.mkdir(exist_ok=True)
jobs = [(rule, seed) for seed in (0, 1) for rule in ("inv_sqrt_d", "ln_d", "ln_sqrt_d")]
for rule, seed in jobs:
    try:
        os.open(locks / f"bpp_{rule}_{seed}", os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        continue
    study.train_models([rule], [seed], run="cpu_long", device="cpu", progress=False, tag="_120x100",
                       problem="bpp", problem_options={"length": 120, "width": 100}, n_train=10, epochs=20,
                       steps_per_epoch=10, batch_size=32, lr=1e-4, max_grad_norm=1.0, baseline_eval_size=128,
                       lr_decay_on_p=False, sites=("encoder", "glimpse"), n_mode="instance")
    print("done", rule, seed, flush=True)
