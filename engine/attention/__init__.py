"""Attention as explanation: W&P's diagnostics on the BiLSTM-attention model."""
from engine.attention.divergences import jsd, kl, tvd

__all__ = ["jsd", "kl", "tvd"]
