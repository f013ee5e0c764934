"""What a run leaves on disk: run directories and their owner, agent directories, checkpoints,
summary.json, and how any file of a run is read back (bounded: regular files, bounded size and depth)."""
