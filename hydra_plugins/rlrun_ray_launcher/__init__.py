"""rlrun's Hydra launcher over Ray: `python -m rlrun.train -m hydra/launcher=ray_cluster ...` (see ray_launcher)."""
