"""kag: train and evaluate LLM agents that turn PyTorch modules into faster CUDA."""

__version__ = "0.1.0"
