"""LLM serving: continuous batching on llama.cpp with prefix reuse, priority classes
and per-request deadlines (see docs/engine.md).

Entry points: ``worthit.engine.engine.Engine`` (``Engine.from_gguf(path, EngineConfig())``),
``worthit.engine.config.EngineConfig``, ``worthit.engine.sequence.SamplingParams`` /
``Priority``, ``worthit.engine.errors``. Nothing is imported here, so importing a light
module of this package (model_files) does not load llama.cpp.
"""
