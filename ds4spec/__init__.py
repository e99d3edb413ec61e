"""ds4spec: a local coding assistant that speeds up a large GGUF target model by speculative decoding."""

__version__ = "0.1.0"
