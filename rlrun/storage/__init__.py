"""What a run leaves on disk: run directories and their owner, agent directories, checkpoints,
summary.json."""
