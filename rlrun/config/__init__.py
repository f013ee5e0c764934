"""Reading the config: schemas, validation, the checks before Hydra runs, run names, saved configs."""
