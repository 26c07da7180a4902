"""Rules every layer shares: where a sentence ends, how money is written, and time as the
store keeps it (epoch milliseconds, UTC).

Defined once here, at the bottom of the import graph, so that the engine's deadline stop,
the explanation guard, the templates and the chat stream cannot disagree about them.
"""
