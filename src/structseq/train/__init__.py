"""One training loop for every model: optimisers and schedules, checkpoints, logging."""
