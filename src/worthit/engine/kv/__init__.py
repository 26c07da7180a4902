"""The KV cache as the engine accounts for it: blocks and prefixes in llama.cpp's cells, and
the host-RAM tier behind them."""
