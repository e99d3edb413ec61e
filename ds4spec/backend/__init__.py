"""The llama.cpp backend: the process-wide runtime, the target model, its tokenizer and prompt rendering."""
