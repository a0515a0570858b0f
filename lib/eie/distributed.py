"""The study's training jobs and evaluation pieces on a Dask cluster: several processes of one
machine, a SLURM cluster with GPUs, or a running scheduler. Optional (`pip install -e '.[cluster]'`);
nothing here imports Dask until a cluster is asked for, and `make study`, `make test` and the
notebooks stay serial.

    python -m eie.worker presets/cpu_paper.yaml 03_train_tsp --cluster local:2
    python -m eie.worker presets/paper.yaml 03_train_tsp 04_train_cvrp --cluster slurm:8

- `client_for(spec)`: "none" (no client: serial, as without --cluster), "local:K" (K worker
  processes of one thread each), "slurm:N" (N SLURM jobs, one GPU each: `slurm_cluster`), or the
  address of a running scheduler ("tcp://host:8786").
- `train_task(job)`: trains one model of a preset, exactly as `eie.worker` does (checkpoints every
  epoch in results/<run>/checkpoints/, so a retried task resumes where a killed one stopped);
  returns a summary, never a model.
- `evaluation_plan(notebook, params)`: the evaluation pieces the run's finished models still need,
  each with the key the notebook's own evaluation will look up (found by running that evaluation
  against a store that records what it asks for); `piece_task(spec)` computes one piece on a worker
  from the exported policy and the test set's seed; the driver alone writes returned pieces into
  the run's store, and the notebook then reads every piece back (`run_grid`).

Tasks are plain functions of their arguments (preset path, notebook, setting, rule, seed, n, method),
so they pickle to any worker; a method registered only in a notebook cell does not exist on the
workers, and is refused by name. Every worker must run the same checkout on a shared filesystem:
each task compares the fingerprint of its own `eie` package with the driver's and refuses to run
on a mismatch. Pieces are keyed by device type, as in a serial evaluation: a worker decodes on the
device type of the key it was given. Locks use `flock`; on a filesystem without it they fall back,
with a warning, to `filelock.SoftFileLock` (`eie.files.exclusive`).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from . import extrapolation, study
from . import methods as registry
from .evaluation import fixed_test_set, greedy_costs
from .evaluation_store import EvaluationStore, model_fingerprint
from .experiments import load
from .problems import make_problem
from .threads import use_threads
from .training import TrainConfig, finished_training

_PACKAGE = Path(__file__).resolve().parent


class SourceMismatch(RuntimeError):
    """A worker runs another version of the `eie` package than the driver."""


def package_fingerprint() -> str:
    """A hash of every module of the `eie` package: the same on every worker of one checkout."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _same_source(job: dict) -> None:
    mine = package_fingerprint()
    if job.get("source") != mine:
        raise SourceMismatch(f"this worker's eie package ({mine}) is not the driver's ({job.get('source')}): run every "
                             "worker from the same checkout, on a filesystem they share")


# ------------------------------------------------------------------------------------------- clients

def slurm_cluster(cores: int = 8, memory: str = "32GB", walltime: str = "04:00:00", gpus: int = 1,
                  lifetime: str = "3h50m", queue: str | None = None, account: str | None = None, **options):
    """A dask-jobqueue SLURMCluster whose every job is one worker with `gpus` GPUs (resource "GPU"),
    `cores` cores and `memory`, retiring itself after `lifetime` (below the wall time, so running
    tasks move on to a fresh job instead of being killed by SLURM). Not scaled: `client_for` asks
    for its jobs."""
    from dask_jobqueue import SLURMCluster

    return SLURMCluster(cores=cores, processes=1, memory=memory, walltime=walltime, queue=queue, account=account,
                        job_extra_directives=[f"--gres=gpu:{gpus}"],
                        worker_extra_args=["--lifetime", lifetime, "--lifetime-stagger", "4m",
                                           "--resources", f"GPU={gpus}"], **options)


def client_for(spec: str | None, threads: int = 1, **slurm_options):
    """A dask.distributed Client for `spec` ("none", "local:K", "slurm:N" or a scheduler address),
    or None for "none"."""
    if spec in (None, "", "none"):
        return None
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as error:
        raise ImportError("--cluster needs Dask: pip install -e '.[cluster]'") from error
    kind, _, count = spec.partition(":")
    if kind in ("local", "slurm"):
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"cluster spec {spec!r}: give a positive count, e.g. {kind}:2")
        if kind == "local":
            return Client(LocalCluster(n_workers=int(count), threads_per_worker=threads, processes=True))
        cluster = slurm_cluster(**slurm_options)
        cluster.scale(jobs=int(count))
        return Client(cluster)
    if "://" in spec:
        return Client(spec)
    raise ValueError(f"cluster spec must be none, local:K, slurm:N or a scheduler address (tcp://host:8786), "
                     f"got {spec!r}")


# ------------------------------------------------------------------------------------------- tasks

def _setup(params: dict, notebook: str, setting: str) -> dict:
    for setup in study.training_setups(notebook, params):
        if setup["setting"] == setting:
            return setup
    raise ValueError(f"{notebook} has no setting {setting!r} under this preset")


def training_jobs(preset, notebook: str, seeds=None, rules=None) -> list[dict]:
    """One job per model the preset trains for `notebook` (only `seeds`, `rules` if given)."""
    params = load(notebook, preset)
    source = package_fingerprint()
    return [{"preset": str(preset), "notebook": notebook, "setting": setup["setting"], "rule": rule, "seed": seed,
             "name": study.model_name(setup["config"]["problem"], rule, params["n_train"], seed, setup["tag"]),
             "source": source}
            for setup in study.training_setups(notebook, params)
            for rule, seed in study.model_pairs(params["rules"], study.seeds_by_rule(params))
            if (seeds is None or seed in seeds) and (rules is None or rule in rules)]


def train_task(job: dict) -> dict:
    """Train (or resume, or find finished) one model: {"name", "epochs", "state", "checkpoint", "eval_cost"}."""
    _same_source(job)
    use_threads(job.get("threads", 1))
    params = load(job["notebook"], job["preset"])
    setup = _setup(params, job["notebook"], job["setting"])
    _, log = study.train_models([job["rule"]], [job["seed"]], run=params["run"], device=params["device"],
                                progress=False, tag=setup["tag"], **setup["config"])
    checkpoint = study.results_dir(params["run"]) / "checkpoints" / f"{job['name']}.pt"
    return {"name": job["name"], "epochs": int(log.epoch.max()), "state": "finished",
            "checkpoint": str(checkpoint), "eval_cost": float(log.eval_cost.iloc[-1])}


class _Recorder(EvaluationStore):
    """A store that records the keys an evaluation asks for and lacks, answering each with a
    placeholder (the evaluation's tables are thrown away); keys the run's store has are skipped."""

    def __init__(self, store: EvaluationStore):
        super().__init__(None)
        self.store, self.missing = store, []

    def get_or_compute(self, key: dict, compute) -> np.ndarray:
        values = self.store.get(key)
        if values is not None:
            return values
        self.missing.append(key)
        return np.ones(1)


def evaluation_plan(notebook: str, params: dict) -> list[dict]:
    """The pieces the run's finished models still lack, each {"key", "kind", "setting", "n", "rule",
    "seed", "method"}: the keys are those `study.evaluate_finished` looks up."""
    recorder = _Recorder(study.run_evaluation_store(params["run"]))
    by_weights = {}
    for _setting, models in study.finished_models(notebook, params).items():
        for (rule, seed), model in models.items():
            by_weights[model_fingerprint(model)] = (rule, seed)
    study.evaluate_finished(notebook, {**params, "progress": False}, store=recorder)
    plan, seen = [], set()
    for key in recorder.missing:
        text = repr(sorted(key.items()))
        if text in seen:
            continue
        seen.add(text)
        rule, seed = by_weights[key["model"]["weights"]] if key["kind"] == "method" else (None, None)
        plan.append({"key": key, "kind": key["kind"], "setting": key["setting"], "n": key["n"], "rule": rule,
                     "seed": seed, "method": key.get("method")})
    return plan


def piece_task(spec: dict) -> dict:
    """Compute one evaluation piece on this worker: {"key", "values", "source"}."""
    _same_source(spec)
    use_threads(spec.get("threads", 1))
    params = load(spec["notebook"], spec["preset"])
    setup = _setup(params, spec["notebook"], spec["setting"])
    problem = make_problem(setup["config"]["problem"], **setup["config"].get("problem_options", {}))
    sign = -1.0 if problem.maximise else 1.0
    key = spec["key"]
    instances = fixed_test_set(problem, spec["n"], params["test_size"], params["test_seed"])
    if spec["kind"] == "reference":
        k = key["reference_size"]
        values = sign * problem.reference_costs({name: v[:k] for name, v in instances.items()},
                                                **key["reference_options"]) if k > 0 else np.array([])
        return {"key": key, "values": np.asarray(values), "source": package_fingerprint()}
    if spec["method"] not in registry.keys():
        raise ValueError(f"method {spec['method']!r} is not registered on this worker: register it in a module "
                         "every worker imports, not in a notebook cell")
    config = TrainConfig(rule=spec["rule"], seed=spec["seed"], **setup["config"])
    name = study.model_name(config.problem, spec["rule"], config.n_train, spec["seed"], setup["tag"])
    model = None
    for folder in (study.results_dir(params["run"]) / "checkpoints", study.models_folder(params["run"])):
        result = finished_training(folder / f"{name}.pt", config)
        if result is not None:
            model = result.model
            break
    if model is None:
        raise FileNotFoundError(f"{name}: no finished checkpoint or exported policy in results/{params['run']}/")
    d = config.model.head_dim
    net, table = study.ensure_scales(d, params["n_train"], params["n_max"], run=params["run"])
    (method,) = extrapolation.bind_methods([spec["method"]], d, params["n_train"], net, table)
    values = sign * greedy_costs(model.to(key["device"]), instances, method,
                                 chunk=params["eval_chunk"]).cpu().numpy()
    return {"key": key, "values": values, "source": package_fingerprint()}


# ------------------------------------------------------------------------------------------- driver

def run_grid(client, preset, notebooks, seeds=None, rules=None, evaluate: bool = True, retries: int = 2,
             gpu_share: float | None = None, train: bool = True) -> list[str]:
    """Train every model of `preset` for `notebooks` on the cluster (each a task keyed by its name,
    retried `retries` times: a retried task resumes from the model's last checkpoint), then compute
    the finished models' missing evaluation pieces there and store them; returns one line per job.
    `train=False` evaluates the finished models only (the worker's --evaluate).
    `gpu_share`: the fraction of a worker's "GPU" resource one training task takes (0.25: four per
    GPU); None asks for no resource (local processes)."""
    from dask.distributed import as_completed
    from tqdm import tqdm

    notebooks = [notebooks] if isinstance(notebooks, str) else list(notebooks)
    lines = []
    if getattr(client, "dashboard_link", None):
        print(f"Dask dashboard: {client.dashboard_link}", flush=True)
    resources = None if gpu_share is None else {"GPU": gpu_share}
    jobs = [job for notebook in notebooks for job in training_jobs(preset, notebook, seeds, rules)] if train else []
    futures = [client.submit(train_task, job, key=f"train-{job['name']}-{time.time_ns()}", retries=retries,
                             resources=resources, pure=False) for job in jobs]
    for future in tqdm(as_completed(futures), total=len(futures), desc="training", mininterval=2.0):
        summary = future.result()
        lines.append(f"trained {summary['name']}: {summary['epochs']} epochs, held-out cost {summary['eval_cost']:.4f}")
    if not evaluate:
        return lines
    source = package_fingerprint()
    for notebook in notebooks:
        params = load(notebook, preset)
        store = study.run_evaluation_store(params["run"])
        plan = evaluation_plan(notebook, params)
        specs = [{**piece, "preset": str(preset), "notebook": notebook, "source": source} for piece in plan]
        futures = [client.submit(piece_task, spec, retries=retries, pure=False) for spec in specs]
        for future in tqdm(as_completed(futures), total=len(futures), desc=f"pieces {notebook}", mininterval=2.0):
            piece = future.result()
            if piece["source"] != source:
                raise SourceMismatch(f"a piece came back from another version of eie ({piece['source']}, here "
                                     f"{source}); it is not stored")
            store.put(piece["key"], piece["values"])
        lines += [f"{notebook} {line}" for line in study.evaluate_finished(notebook, {**params, "progress": False})]
    return lines
