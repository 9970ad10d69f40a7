"""Runtime backends: make one model stage runnable. Voices see only `Stage`."""
