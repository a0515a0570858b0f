#!/usr/bin/env bash
# One prepared run of the GPU checks, for a CUDA machine (the `device` tool sends the working tree
# and runs this in its root; its python3 holds PyTorch). Each step has its own time limit, so one slow
# step cannot take the others' time; every step's output is kept under $OUT (or /tmp/device_check).
#   bash benchmarks/device_check.sh
# Steps: the paper-scale evaluation against the CPU's committed costs (bench_device_agreement.py), the
# decoding throughput of TSP and CVRP (the issue-13 target: CVRP n = 1600, 16384 instances in under 2
# minutes), one training step at the paper's setting and at batch 512, and bin packing's placement step.
set -u
export PYTHONPATH=lib PYTHONUNBUFFERED=1
out=${OUT:-/tmp/device_check}
mkdir -p "$out"
python=${PYTHON:-python3}
nvidia-smi -L 2>&1 | tee "$out/device.log"
$python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" \
  2>&1 | tee -a "$out/device.log"
step() {  # step NAME SECONDS COMMAND...: run it with a time limit, its output shown and kept
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit} s): $*"
  local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
  echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s"
}
step agreement 150 $python benchmarks/bench_device_agreement.py --device cuda
step decode_tsp 90 $python benchmarks/bench_decode.py --device cuda --problem tsp
step decode_cvrp 90 $python benchmarks/bench_decode.py --device cuda --problem cvrp
step train_step 90 $python benchmarks/bench_train_step.py --device cuda --steps 5
step train_step_512 60 $python benchmarks/bench_train_step.py --device cuda --steps 5 --batch 512
step placement 90 $python benchmarks/bench_placement.py --device cuda --repeats 10 --train-boxes 20 --train-steps 5
