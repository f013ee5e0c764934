"""The training run: config to parts (build), the loop, the agents of a batched run, devices."""
