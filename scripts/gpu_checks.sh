#!/usr/bin/env bash
# Every check that needs a CUDA GPU, in one pass of at most 9 minutes on a machine with one GPU and 16
# cores and no network, so that a short slot suffices for one run and a rerun. Results go to $OUT
# (default outputs/gpu_checks), one file per check, and everything is echoed to stdout:
#   doctor.txt     python -m rlrun.doctor
#   pytest.txt     the CUDA tests: recorded updates and actor (tests/integration/test_graphs.py), AMP/compile
#                  (tests/integration/test_acceleration.py), stacked agents on CUDA
#                  (tests/integration/test_batched.py, unit tests)
#   update.txt     us per gradient step, each switch on/off (scripts/bench.py switches --device cuda)
#   cartpole.txt   the default CartPole config, whole loop: device=cuda (plain, then with device.cuda_graphs)
#                  vs device=cpu (bench.py updates)
#   atari.txt      ALE/Pong, 8 envs: env alone and the whole loop with updates at the Nature settings,
#                  both backends (bench.py atari)
#   pong.txt       +experiment=atari_fast on Pong for a fixed slot: env steps/s and the score so far (the
#                  600-second score bar needs a run of its own: timeout 600 python -m rlrun.train
#                  +experiment=atari_fast device=cuda)
#   pqn.txt        +experiment=pqn_atari on Pong for a short slot: env steps/s
#   agents.txt     seeds=256 on CartPole in one process vs one agent, 20k env steps each (bench.py seeds)
#   minatar.txt    MinAtar Breakout at the paper's DQN settings, seeds=64 on the GPU (the CPU figures:
#                  docs/results/minatar.md): agent env steps/s from the progress lines (x64 for frames/s)
# Usage: OUT=/tmp/gpu bash scripts/gpu_checks.sh [dir of wheels to install first, for an offline machine]
set -u
OUT=${OUT:-outputs/gpu_checks}
mkdir -p "$OUT"
if [ -n "${1:-}" ] && [ -d "$1" ]; then
  python3 -m pip install -q --no-index --no-deps "$1"/*.whl > "$OUT/pip.txt" 2>&1 || cat "$OUT/pip.txt"
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
PY=python3
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() {  # run NAME SECONDS COMMAND...: output to $OUT/NAME.txt, and its tail to stdout
  local name=$1 limit=$2
  shift 2
  stamp "$name (limit ${limit}s)"
  timeout "$limit" "$@" >> "$OUT/$name.txt" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.txt"
  stamp "$name rc=$rc"
}
COMMON="log.progress_bar=false checkpoint.every=0 eval.interval=0 log.plot=false"

run doctor 20 $PY -m rlrun.doctor
run pytest 80 $PY -m pytest -q -x -p no:cacheprovider tests/integration/test_graphs.py tests/integration/test_acceleration.py \
  tests/integration/test_batched.py -k "cuda or graph or stacked" -m "not slow"
run update 60 $PY scripts/bench.py switches --device cuda
run cartpole 40 $PY scripts/bench.py updates --device cuda
run cartpole 40 $PY scripts/bench.py updates --device cuda --overrides device.cuda_graphs=true
run cartpole 20 $PY scripts/bench.py updates --device cpu
run atari 70 $PY scripts/bench.py atari --device cuda --envs 8 --reps 1 --steps 500 --loop-steps 8000
# The fast preset on Pong for a fixed slot: its env steps/s and the 100-episode mean of raw scores so far.
run pong 100 $PY -m rlrun.train +experiment=atari_fast device=cuda $COMMON log.interval=20000 \
  hydra.run.dir=outputs/gpu_pong_fast
$PY - >> "$OUT/pong.txt" 2>&1 <<'EOF'
import csv, pathlib
path = pathlib.Path("outputs/gpu_pong_fast/episodes.csv")
rows = list(csv.DictReader(path.open())) if path.exists() else []
returns = [float(r["return"]) for r in rows]
last = rows[-1]["env_step"] if rows else 0
mean = sum(returns[-100:]) / max(1, len(returns[-100:]))
print(f"Pong atari_fast: {len(rows)} episodes by env step {last}; mean of the last {len(returns[-100:])}: {mean:.1f}")
EOF
tail -n 1 "$OUT/pong.txt"
run pqn 35 $PY -m rlrun.train +experiment=pqn_atari device=cuda $COMMON log.interval=20000 \
  hydra.run.dir=outputs/gpu_pqn
run agents 35 $PY scripts/bench.py seeds --seeds 256 --device cuda --steps 20000 --reps 1
run minatar 40 $PY -m rlrun.train +experiment=minatar_paper env.id=MinAtar/Breakout-v0 device=cuda seeds=64 \
  total_steps=40000 $COMMON log.interval=5000 hydra.run.dir=outputs/gpu_minatar
stamp "all done"
