"""How long engine work takes: the step-time model and batch window, a step's time
budget, how long an answer is expected to run, and measuring this machine at start."""
