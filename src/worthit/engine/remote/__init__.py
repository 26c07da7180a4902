"""Engine replicas over HTTP as one engine: the OpenAI-compatible client of one
replica, the router over several, and the router's metrics."""
