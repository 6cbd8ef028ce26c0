"""Inference, comparison and export of a trained model (checkpoints, ONNX)."""
