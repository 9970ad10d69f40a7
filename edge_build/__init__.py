"""On-device artifacts: turns a voice's ONNX graphs into files tuned for this box."""
