"""gagpo: text environments and a trainer for LLM agents."""

__version__ = "0.1.0"
