"""Tensors: ModelRunner (build -> load -> process -> KV cache -> compile -> capture), KV cache tensors, CUDA graphs."""
