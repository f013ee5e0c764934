"""Prove that a refactor changed no bits of what runs produce: record file hashes of fixed runs, then compare.

    taskset -c 1 python scripts/identical_runs.py record --rev 46319c8 --out /tmp/identical/base.json
    taskset -c 1 python scripts/identical_runs.py record --rev WORKTREE --out /tmp/identical/new.json
    python scripts/identical_runs.py compare /tmp/identical/base.json /tmp/identical/new.json
    ... --cases default,c51                  # a subset (record and compare)

`record` checks <rev> out as a detached git worktree in /tmp/identical/<rev>/ (reused if there) and runs each
case there with `python -m rlrun.train` (cwd and PYTHONPATH = the worktree, so its own rlrun is imported, not
the editable install), in a fresh hydra.run.dir /tmp/identical/runs/<rev>/<case>. It records the sha256 of
every episodes.csv and model.pt under that dir and the wall seconds. `--rev WORKTREE` runs the working tree
of the repo it is started from (run it from the repo root). `compare` prints case / file / same|DIFFERENT and
exits 1 if any file differs or is missing. Run records one after another, pinned to one core (taskset).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BASE = Path("/tmp/identical")
COMMON = ["eval.interval=0", "log.plot=false", "log.progress_bar=false", "checkpoint.every=0", "device=cpu"]
LRS = [f"{{seed:{s},optimizer.lr:{lr}}}" for lr in ("0.001", "0.003") for s in range(3)]
CASES = {
    "default": ["total_steps=20000"],
    "dueling_per": ["network=dueling", "buffer=per", "total_steps=8000"],
    "c51": ["network=c51", "total_steps=6000"],
    "qrdqn": ["network=qrdqn", "total_steps=6000"],
    "iqn": ["network=iqn", "total_steps=6000"],
    "pqn": ["+experiment=pqn_cartpole", "total_steps=20000"],
    # Pong on ale-py's vector env, games cut at 250 steps so that episodes.csv gets rows (as the tests do).
    "atari": [
        "env=atari",
        "total_steps=3000",
        "algo.learning_starts=1000",
        "buffer.capacity=5000",
        "env.num_envs=4",
        "env.max_episode_steps=250",
    ],
    "batched_per": ["buffer=per", "total_steps=4000", f"agents=[{','.join(LRS)}]"],
    "noisy": ["network=noisy", "total_steps=6000"],
    "seeds3_iqn": ["network=iqn", "seeds=3", "total_steps=3000"],
}
HASHED = ("episodes.csv", "model.pt")


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def checkout(rev: str) -> tuple[Path, str]:
    """(source tree, commit) for rev: a detached worktree under BASE, or the repo itself for WORKTREE."""
    root = Path(git("rev-parse", "--show-toplevel")).resolve()
    if rev == "WORKTREE":
        if Path.cwd().resolve() != root:
            raise SystemExit(f"--rev WORKTREE: run from the repo root {root}")
        dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
        return root, git("rev-parse", "HEAD") + dirty
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    tree = BASE / rev.replace("/", "_")
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--quiet", "--detach", str(tree), sha)
    elif git("rev-parse", "HEAD", cwd=tree) != sha:
        git("checkout", "--quiet", "--detach", sha, cwd=tree)
    return tree.resolve(), sha


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record(args: argparse.Namespace) -> int:
    tree, commit = checkout(args.rev)
    env = {**os.environ, "PYTHONPATH": str(tree), "HYDRA_FULL_ERROR": "1"}
    where = subprocess.run(
        [sys.executable, "-c", "import rlrun,sys;print(rlrun.__file__)"],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree):
        raise SystemExit(f"rlrun is imported from {where}, not from {tree}")
    print(f"rev {args.rev} = {commit}: rlrun from {where}", flush=True)
    out: dict = {"rev": args.rev, "commit": commit, "python": sys.version.split()[0], "cases": {}}
    failed = 0
    for case in args.cases:
        run_dir = BASE / "runs" / args.rev.replace("/", "_") / case
        shutil.rmtree(run_dir, ignore_errors=True)
        argv = [sys.executable, "-m", "rlrun.train", *CASES[case], *COMMON, f"hydra.run.dir={run_dir}"]
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        files = {
            str(p.relative_to(run_dir)): sha256(p)
            for p in sorted(run_dir.rglob("*"))
            if p.name in HASHED and p.is_file()
        }
        entry = {"argv": argv[3:], "wall_s": round(wall, 2), "returncode": proc.returncode, "files": files}
        if proc.returncode != 0:
            failed += 1
            entry["stderr_tail"] = proc.stderr[-3000:]
            print(proc.stderr[-3000:], file=sys.stderr)
        out["cases"][case] = entry
        print(f"{case:12s} rc={proc.returncode} {wall:7.1f}s {len(files)} files", flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")  # after every case: a partial record survives
    print(f"wrote {args.out}")
    return 1 if failed else 0


def compare(args: argparse.Namespace) -> int:
    a, b = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    print(f"a: {args.a} ({a['rev']} = {a['commit']})\nb: {args.b} ({b['rev']} = {b['commit']})")
    cases = args.cases or sorted(
        set(a["cases"]) | set(b["cases"]), key=lambda c: (list(CASES).index(c) if c in CASES else len(CASES), c)
    )
    rows, bad = [], 0
    for case in cases:
        ca, cb = a["cases"].get(case), b["cases"].get(case)
        if ca is None or cb is None or ca["returncode"] or cb["returncode"]:
            rows.append(
                (case, "(the run)", "MISSING in a" if ca is None else "MISSING in b" if cb is None else "FAILED")
            )
            bad += 1
            continue
        if not ca["files"] and not cb["files"]:
            rows.append((case, "(no files)", "MISSING"))
            bad += 1
        for name in sorted(set(ca["files"]) | set(cb["files"])):
            ha, hb = ca["files"].get(name), cb["files"].get(name)
            verdict = (
                "same" if ha == hb else "MISSING in a" if ha is None else "MISSING in b" if hb is None else "DIFFERENT"
            )
            bad += verdict != "same"
            rows.append((case, name, verdict))
    width = max(len(r[1]) for r in rows) if rows else 4
    print(f"{'case':12s} {'file':{width}s} result")
    for case, name, verdict in rows:
        print(f"{case:12s} {name:{width}s} {verdict}")
    print(f"{len(rows) - bad} same, {bad} not" if bad else f"all {len(rows)} files identical")
    return 1 if bad else 0


def case_list(text: str) -> list[str]:
    names = [c for c in text.split(",") if c]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown cases {unknown}; known: {','.join(CASES)}")
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the cases at a git rev and write their file hashes")
    rec.add_argument("--rev", required=True, help="a git rev, or WORKTREE for this working tree")
    rec.add_argument("--out", required=True, help="the JSON file to write")
    rec.add_argument("--cases", type=case_list, default=list(CASES), help="comma-separated subset")
    cmp = sub.add_parser("compare", help="compare two records; exit 1 on any difference")
    cmp.add_argument("a")
    cmp.add_argument("b")
    cmp.add_argument("--cases", type=case_list, default=None, help="comma-separated subset")
    args = parser.parse_args()
    return record(args) if args.command == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
