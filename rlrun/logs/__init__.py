"""What a run logs: the logger, the metric window, and the sinks (TensorBoard, CSV, MLflow, W&B)."""
