"""The numpy end of the HiFT vocoder (CosyVoice 2): its inverse STFT, which has no ONNX op.

HiFT predicts a magnitude and a phase per STFT bin (n_fft 16, hop 4 at 24 kHz); this turns them
into samples as torch.istft(center=True) does: inverse real FFT per frame, window, overlap-add,
division by the summed squared window, and the half-window trimmed off both ends.
"""

from __future__ import annotations

import numpy as np

MAX_MAGNITUDE = 100.0  # HiFT clips its magnitudes here before the iSTFT


def hann_window(n_fft: int) -> np.ndarray:
    """The periodic Hann window (scipy's get_window("hann", n, fftbins=True))."""
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)


def istft(magnitude: np.ndarray, phase: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """[batch, n_fft // 2 + 1, frames] magnitude and phase → [batch, hop * (frames - 1)] samples."""
    window = hann_window(n_fft).astype(np.float64)
    magnitude = np.minimum(magnitude, MAX_MAGNITUDE)
    spectrum = magnitude * np.cos(phase) + 1j * (magnitude * np.sin(phase))
    frames = np.fft.irfft(spectrum, n=n_fft, axis=1) * window[None, :, None]
    batch, count = spectrum.shape[0], spectrum.shape[-1]
    length = n_fft + hop * (count - 1)
    signal = np.zeros((batch, length))
    envelope = np.zeros(length)
    # Overlap-add in n_fft / hop strided passes: each adds one hop of every frame at once.
    for start in range(0, n_fft, hop):
        piece = frames[:, start : start + hop, :].transpose(0, 2, 1).reshape(batch, count * hop)
        signal[:, start : start + count * hop] += piece
        envelope[start : start + count * hop] += np.tile(window[start : start + hop] ** 2, count)
    trim = slice(n_fft // 2, length - n_fft // 2)
    return (signal[:, trim] / envelope[trim]).astype(np.float32)
