#!/usr/bin/env bash
# One prepared pass of every check that needs a CUDA GPU (issues 6, 7, 8), sized for a ~9-minute slot on a
# machine with one GPU and 16 cores and no network. Results go to $OUT (default outputs/gpu_checks):
#   doctor.txt   python -m rlrun.doctor
#   pytest.txt   tests/test_acceleration.py and the unit tests of tests/test_batched.py on CUDA
#   bars.txt     the learning bars of the env presets, one CPU process per seed (run meanwhile)
#   pong.txt     ALE/Pong-v5 with env=atari on CUDA for a few minutes: SPS and score so far
#   switches.txt us/update for plain / amp / compile / cuda_graphs (scripts/bench.py switches)
#   loop.txt     whole-loop env steps/s: default, dueling+PER, 64 vector envs (scripts/bench.py updates)
#   seeds.txt    seeds=64 vs one seed (scripts/bench.py seeds), and CUDA agreement of a batched agent with its
#                single-seed run
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

stamp doctor
$PY -m rlrun.doctor > "$OUT/doctor.txt" 2>&1

# --- learning bars on the CPU cores, in the background (issue 7) -------------------------------
BARS=outputs/bars
mkdir -p $BARS
pids=()
for preset in pendulum mountaincar lunarlander; do  # env=X is X's preset, tuned learner included
  for seed in 0 1 2 3 4; do
    $PY -m rlrun.train env=$preset seed=$seed device=cpu device.threads=1 stop_on_solve=true \
      eval.interval=0 log.progress_bar=false checkpoint.every=0 hydra.run.dir=$BARS/${preset}_s$seed \
      > $BARS/${preset}_s$seed.log 2>&1 &
    pids+=($!)
  done
done
stamp "started ${#pids[@]} learning runs"

# --- Pong on the GPU meanwhile (issue 7), a fixed slot --------------------------------------------
timeout 190 $PY -m rlrun.train env=atari env.id=ALE/Pong-v5 device=cuda algo.learning_starts=20000 \
  exploration.duration=100000 log.interval=5000 eval.interval=0 checkpoint.every=0 log.progress_bar=false \
  hydra.run.dir=outputs/pong > "$OUT/pong.txt" 2>&1 &
PONG=$!

# --- CUDA correctness (runs while the CPU is busy; not timed) ------------------------------------
stamp pytest
timeout 200 $PY -m pytest -q -x tests/test_acceleration.py tests/test_batched.py \
  -k "not multirun and not resumed and not single_seed_run and not refusal" > "$OUT/pytest.txt" 2>&1
stamp "pytest rc=$?"

# The bars get until 200 s after the start; a run still going then is stopped and reported as unfinished.
while [ $(( $(date +%s) - T0 )) -lt 200 ]; do
  alive=0; for p in "${pids[@]}"; do kill -0 $p 2>/dev/null && alive=$((alive + 1)); done
  [ $alive -eq 0 ] && break
  sleep 5
done
kill "${pids[@]}" 2>/dev/null
wait $PONG 2>/dev/null
$PY - >> "$OUT/pong.txt" 2>&1 <<'EOF'
import csv
rows = list(csv.DictReader(open("outputs/pong/episodes.csv")))
print(f"Pong: {len(rows)} episodes; last env step {rows[-1]['env_step'] if rows else 0}")
for r in rows[-10:]:
    print(r)
EOF
$PY - > "$OUT/bars.txt" 2>&1 <<'EOF'
import json, pathlib
bars = {"pendulum": -200, "mountaincar": -110, "lunarlander": 200}
for preset, threshold in bars.items():
    solved = 0
    for seed in range(5):
        d = pathlib.Path(f"outputs/bars/{preset}_s{seed}")
        try:
            s = json.loads((d / "summary.json").read_text())
        except FileNotFoundError:
            rows = (d / "episodes.csv").read_text().splitlines()[1:] if (d / "episodes.csv").exists() else []
            rets = [float(r.split(",")[2]) for r in rows]
            best = max((sum(rets[i - 100:i]) / 100 for i in range(100, len(rets) + 1)), default=None)
            print(f"{preset} seed {seed}: unfinished in the slot at step {rows[-1].split(',')[0] if rows else 0}, "
                  f"best 100-episode mean so far {best}")
            continue
        solved += s["solved_step"] is not None
        print(f"{preset} seed {seed}: solved_step {s['solved_step']} final_mean_100 {s['final_mean_return_100']:.1f} "
              f"episodes {s['episodes']} wall {s['wall_time_s']:.0f}s")
    print(f"{preset}: {solved}/5 reached {threshold}")
EOF
stamp "bars done"

# --- timings, now with the CPU quiet -------------------------------------------------------------
{
  timeout 120 $PY scripts/bench.py seeds --seeds 64 --device cuda --steps 10000 --reps 1
  for args in "seed=0" "seeds=2"; do
    timeout 40 $PY -m rlrun.train $args device=cuda total_steps=1500 algo.learning_starts=300 eval.interval=0 \
      log.plot=false checkpoint.every=0 hydra.run.dir=outputs/agree_${args/=/} > /dev/null 2>&1
  done
  if cmp -s outputs/agree_seed0/episodes.csv "outputs/agree_seeds2/seed=0/episodes.csv"; then
    echo "CUDA: agent 0 of seeds=2 has the same episodes as the single-seed run (1500 steps)"
  else
    echo "CUDA: agent 0 of seeds=2 diverges from the single-seed run within 1500 steps:"
    diff outputs/agree_seed0/episodes.csv "outputs/agree_seeds2/seed=0/episodes.csv" | head -4
  fi
} > "$OUT/seeds.txt" 2>&1
stamp "seeds done"
timeout 100 $PY scripts/bench.py switches --device cuda > "$OUT/switches.txt" 2>&1
stamp "switches rc=$?"
{
  timeout 60 $PY scripts/bench.py updates --device cuda
  timeout 45 $PY scripts/bench.py updates --device cuda --overrides env.num_envs=64
} > "$OUT/loop.txt" 2>&1
stamp "loop done"
stamp "all done"
