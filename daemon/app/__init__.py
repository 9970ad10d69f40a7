"""The service assembled and run: the composition root (which builds every part, adapters
included), the parts' start and stop in order, and the supervisor that keeps them up."""
