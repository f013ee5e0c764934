"""Sweeps: jobs packed into batched processes, a sweep's jobs read back, Hydra's callbacks."""
