#!/usr/bin/env bash
# Train run 3's remaining models (presets/cpu_long_v2.yaml) on a lent GPU for a fixed wall time,
# then pack what came of them under $OUT: the policies whose training ended (exported, as
# `eie.worker --save-carry` exports them) and the checkpoints of those still training, the furthest
# first, as many as the device tool brings back (8 files, 16 MiB each, 64 MiB in all).
#   bash results/cpu_long_v2/gpu_train.sh SECONDS WORKERS [NOTEBOOK ...] [-- WORKER_OPTION ...]
#   (notebooks by default 03_train_tsp 08_rivals; worker options, e.g. `--seeds 2`, go to each training worker)
# e.g. `gpu_train.sh 430 8` (the twenty-third session's TSP run), `gpu_train.sh 430 8 04_train_cvrp`,
# `gpu_train.sh 500 8 03_train_tsp 08_rivals 04_train_cvrp -- --seeds 2` (the twenty-fourth session's).
# Several workers share the GPU (a model at N = 20 is launch-bound, so one process leaves it mostly
# idle); with CUDA's multi-process service (MPS) their kernels run side by side, so it is started
# where it can be, and without it half as many workers are started. Worker i takes the notebooks
# rotated by i, so that no notebook's last models leave workers waiting. Back here:
#   python results/cpu_long_v2/gpu_transfer.py unpack FILES_AT   (into checkpoints/ and models/)
# The working tree must travel in 64 MiB: move results/*/carry and the other runs' models/ out of it
# for the call (README "Eight TSP20 models trained on a lent GPU").
set -u
export PYTHONPATH=lib PYTHONUNBUFFERED=1
seconds=${1:-450}
asked=${2:-10}
shift $(( $# < 2 ? $# : 2 ))
notebooks=()
while (( $# )) && [[ $1 != -- ]]; do notebooks+=("$1"); shift; done
(( $# )) && shift
worker_options=("$@")
(( ${#notebooks[@]} )) || notebooks=(03_train_tsp 08_rivals)
echo "notebooks: ${notebooks[*]}; worker options: ${worker_options[*]:-none}"
out=${OUT:-/tmp/gpu_train}
mkdir -p "$out"
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p /tmp/mps_pipe /tmp/mps_log
if timeout 20 nvidia-cuda-mps-control -d && timeout 60 python3 -c "import torch; assert torch.ones(4, device='cuda').sum().item() == 4"; then
  workers=$asked; echo "MPS on: $workers workers"
else
  echo quit | timeout 10 nvidia-cuda-mps-control 2>/dev/null
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  workers=$(( (asked + 1) / 2 )); echo "MPS not available: $workers workers"
fi
start=$SECONDS
since=$(date +%s)
count=${#notebooks[@]}
for i in $(seq 0 $((workers - 1))); do
  order=("${notebooks[@]:$((i % count))}" "${notebooks[@]:0:$((i % count))}")
  timeout "$seconds" python3 -m eie.worker presets/cpu_long_v2.yaml "${order[@]}" "${worker_options[@]}" --threads 1 > "/tmp/gpu_w$i.log" 2>&1 &
  sleep 2
done
wait
echo "training ended after $((SECONDS - start)) s"
tail -n 3 /tmp/gpu_w*.log
python3 -m eie.worker presets/cpu_long_v2.yaml "${notebooks[@]}" --status 2>&1 | tee /tmp/gpu_status.log
python3 -m eie.worker presets/cpu_long_v2.yaml "${notebooks[@]}" --save-carry > /tmp/gpu_save_carry.log 2>&1
tail -n 30 /tmp/gpu_save_carry.log
python3 results/cpu_long_v2/gpu_transfer.py pack "$out" --since "$since" --logs /tmp/gpu_w*.log /tmp/gpu_status.log /tmp/gpu_save_carry.log
ls -la "$out"
