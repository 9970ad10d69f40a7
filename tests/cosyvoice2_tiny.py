"""The tiny Qwen2 backbone the CosyVoice 2 tests build their speech-token LLM on."""

from __future__ import annotations


def tiny_qwen_config(vocab_size: int, positions: int):
    """Qwen2 at its smallest workable size; the wide init keeps decoding from collapsing onto
    one token, so that token-for-token comparisons mean something."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=positions,
        initializer_range=0.3,
        tie_word_embeddings=False,
        use_sliding_window=False,
    )
