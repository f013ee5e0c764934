#!/usr/bin/env bash
# Every check that needs a CUDA GPU, in one pass of at most 9 minutes on a machine with one GPU and 16 cores
# and no network, so that a short slot suffices for one run and a partial rerun. Most important first: a slot
# cut short still returns the correctness checks. Results go to $OUT (default outputs/gpu_checks), one file
# per check, and the tail of each is echoed to stdout:
#   doctor.txt     python -m rlrun.doctor
#   pytest.txt     the CUDA tests: recorded updates and actor (tests/integration/test_graphs.py), AMP/compile
#                  (tests/integration/test_acceleration.py), stacked agents on CUDA (test_batched.py)
#   minatar.txt    MinAtar Breakout at the paper's DQN settings, seeds=64 on the GPU (the CPU figures:
#                  docs/results/minatar.md), eager and with device.cuda_graphs, then PQN's MinAtar recipe
#                  (128 envs) on the GPU; between them the DQN preset with an update per four frames,
#                  seeds=64 with device.cuda_graphs
#   pbt.txt        a PBT population (seeds=16 +pbt=truncation) on CartPole on the GPU: exploits happen there
#   update.txt     us per gradient step, each switch on/off (scripts/bench.py switches)
#   cartpole.txt   the default CartPole config, whole loop, 20k steps: device=cuda (plain, then with
#                  device.cuda_graphs) vs device=cpu
#   agents.txt     seeds=256 on CartPole in one process with device.cuda_graphs, 8k env steps each
#   atari.txt      ALE/Pong, 8 envs: env alone and the whole loop (bench.py atari), then +experiment=pqn_atari
#                  for a short slot
#   runs.txt       env steps/s and wall time of every training run above (their summary.json)
# Usage: OUT=/tmp/gpu bash scripts/gpu_checks.sh [dir of wheels to install first, for an offline machine]
# A dry run of the same commands on the CPU, a few seconds each: DEVICE=cpu SCALE=0.2 bash scripts/gpu_checks.sh
# Some checks only (a rerun): ONLY='minatar|atari' bash scripts/gpu_checks.sh
set -u
OUT=${OUT:-outputs/gpu_checks}
DEVICE=${DEVICE:-cuda}
SCALE=${SCALE:-1}
RUNS=${RUNS:-outputs/gpu_runs}
mkdir -p "$OUT" "$RUNS"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
if [ -n "${1:-}" ] && [ -d "$1" ]; then  # --target: the image's environment stays as it is
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$1"/*.whl \
    > "$OUT/pip.txt" 2>&1 || cat "$OUT/pip.txt"
  export PYTHONPATH=$PWD:/tmp/site
fi
PY=python3
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() {  # run NAME SECONDS COMMAND...: output appended to $OUT/NAME.txt, and its tail to stdout
  [[ "$1" =~ ^(${ONLY:-.*})$ ]] || return 0
  local name=$1 limit
  limit=$(python3 -c "print(max(5, round($2 * $SCALE)))")
  shift 2
  stamp "$name (limit ${limit}s): ${*:3:6}"
  echo "\$ $*" >> "$OUT/$name.txt"
  timeout -k 10 "$limit" "$@" >> "$OUT/$name.txt" 2>&1
  local rc=$?
  tail -n 14 "$OUT/$name.txt"
  stamp "$name rc=$rc"
}
COMMON="log.progress_bar=false log.progress_interval=0 checkpoint.every=0 eval.interval=0 log.plot=false"

run doctor 15 $PY -m rlrun.doctor
run pytest 100 $PY -m pytest -q -p no:cacheprovider --timeout 45 tests/integration/test_graphs.py \
  tests/integration/test_acceleration.py tests/integration/test_batched.py -k "cuda or graph or stacked" -m "not slow"
# past the 5,000 random frames, so that the progress lines' step/s include the updates; eager, then recorded
# (the eager run without the compiled optimizer step, as its earlier figure: a first compile would eat its limit)
run minatar 50 $PY -m rlrun.train +experiment=minatar_paper env.id=MinAtar/Breakout-v0 device=$DEVICE seeds=64 \
  device.compile_optimizer=false total_steps=12500 $COMMON log.interval=2500 hydra.run.dir=$RUNS/minatar_paper_seeds64
run minatar 50 $PY -m rlrun.train +experiment=minatar_paper env.id=MinAtar/Breakout-v0 device=$DEVICE seeds=64 \
  device.cuda_graphs=true total_steps=12500 $COMMON log.interval=2500 hydra.run.dir=$RUNS/minatar_paper_seeds64_graphs
run minatar 40 $PY -m rlrun.train env=minatar algo.train_freq=4 env.id=MinAtar/Breakout-v0 device=$DEVICE seeds=64 \
  device.cuda_graphs=true total_steps=25000 $COMMON log.interval=5000 hydra.run.dir=$RUNS/minatar_dqn_tf4_seeds64_graphs
run minatar 30 $PY -m rlrun.train +experiment=pqn_minatar env.id=MinAtar/Breakout-v0 device=$DEVICE \
  total_steps=2000000 $COMMON log.interval=200000 hydra.run.dir=$RUNS/minatar_pqn
run pbt 30 $PY -m rlrun.train seeds=16 +pbt=truncation pbt.interval=1000 device=$DEVICE total_steps=6000 \
  $COMMON log.interval=2000 hydra.run.dir=$RUNS/pbt
tail -n 20 "$RUNS/pbt/pbt.csv" >> "$OUT/pbt.txt" 2>&1; tail -n 3 "$OUT/pbt.txt"
run update 45 $PY scripts/bench.py switches --device $DEVICE
CARTPOLE="total_steps=20000 $COMMON log.interval=5000"
run cartpole 30 $PY -m rlrun.train device=$DEVICE $CARTPOLE hydra.run.dir=$RUNS/cartpole_$DEVICE
run cartpole 30 $PY -m rlrun.train device=$DEVICE device.cuda_graphs=true $CARTPOLE hydra.run.dir=$RUNS/cartpole_graphs
run cartpole 20 $PY -m rlrun.train device=cpu $CARTPOLE hydra.run.dir=$RUNS/cartpole_cpu
run agents 40 $PY -m rlrun.train device=$DEVICE seeds=256 device.cuda_graphs=true total_steps=8000 $COMMON \
  log.interval=2000 hydra.run.dir=$RUNS/cartpole_seeds256_graphs
run atari 40 $PY scripts/bench.py atari --device $DEVICE --envs 8 --reps 1 --steps 500 --loop-steps 8000
run atari 20 $PY -m rlrun.train +experiment=pqn_atari device=$DEVICE $COMMON log.interval=20000 \
  hydra.run.dir=$RUNS/pqn_atari
# Env steps/s of the runs above, also of those the slot stopped (their last progress line is in the .txt files).
$PY - "$RUNS" >> "$OUT/runs.txt" 2>&1 <<'PYEOF'
import json, pathlib, sys
for summary in sorted(pathlib.Path(sys.argv[1]).glob("*/summary.json")):
    s = json.loads(summary.read_text())
    agents = s.get("agents") or {}
    first = next(iter(agents.values()), {}) if isinstance(agents, dict) else agents[0]
    scalars = lambda d: {k: v for k, v in d.items() if isinstance(v, (int, float, str))}
    print(summary.parent.name, scalars(s), "first agent:", scalars(first) if isinstance(first, dict) else first)
PYEOF
cat "$OUT/runs.txt"
stamp "all done"
