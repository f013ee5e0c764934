"""`python -m rlrun.train [overrides]`: the command line around `rlrun.run.train`.

`main` checks the command before Hydra writes anything (`rlrun.preflight`), then hands it to the Hydra app
`hydra_main`, a thin wrapper that calls `train` and returns the objective sweepers optimise. Everything that
can go wrong becomes one line on stderr and an exit code (`rlrun.jobs`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rlrun import preflight, signals
from rlrun.jobs import EXIT_CONFIG, EXIT_OS, REFUSED, fail, run_job
from rlrun.resume import load_resume, resume
from rlrun.run import train


@hydra.main(version_base="1.3", config_path="pkg://rlrun.conf", config_name="config")
def hydra_main(cfg: DictConfig) -> float | None:
    """Returns the objective that sweepers (Optuna) optimise: the final 100-episode mean training return."""
    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    sweep_job = hydra_cfg.job.num if hydra_cfg.mode == RunMode.MULTIRUN else None

    def job() -> dict[str, Any]:
        if cfg.resume is not None:  # a sweep over resumed runs: each continues in its own directory
            resumed, run_dir, state = load_resume(cfg, list(hydra_cfg.overrides.task))
            return train(resumed, run_dir, state)
        return train(cfg, out_dir)

    summary = run_job(job, out_dir, sweep_job)
    return None if summary is None else summary["final_mean_return_100"]


def main() -> None:
    """Entry point: check the command (nothing is written for a refused one), then run it."""
    signals.stop_on_signal()
    try:
        plan = preflight.plan(sys.argv[1:])
    except REFUSED as e:
        fail(EXIT_CONFIG, str(e))
    except OSError as e:
        fail(
            EXIT_OS,
            f"cannot create the run directory ({e}); choose another with hydra.run.dir=... "
            "(or hydra.sweep.dir=... for -m)",
        )
    if plan is not None and plan.resume is not None:
        resume(plan.resume, plan.resume_overrides)
        return
    if plan is not None:
        signals.in_sweep = plan.run_dir is None
        sys.argv[1:] = plan.hydra_argv
    hydra_main()
