"""Local models: GGUF files from the Hugging Face Hub, fetched once into its cache (`hf_hub`), and
llama.cpp's server for one file, run in this process (`llama_server`); the providers talk to
it as to any OpenAI-compatible server.

Imports the shared vocabulary only.
"""

__all__ = ["fitting", "hf_hub", "hub_file", "llama_server"]
