"""rlrun's batched launcher: `python -m rlrun.train -m hydra/launcher=batched ...` (see batched_launcher)."""
