"""Price watches: the store of watches and their notifications, evaluating them after
each commit, delivering what fired (signed webhooks, SSE), and resuming a stream."""
