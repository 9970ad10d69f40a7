"""The box's sound device (the player): the job's audio played as it is made; the stream may
stay open after it (`audio.keep_awake_s`, the player's)."""

from __future__ import annotations

import numpy as np

from daemon.audio.player import Playback, Player


class DeviceSink:
    def __init__(self, player: Player) -> None:
        self.player = player
        self._playback: Playback | None = None

    lead_s = 0.0

    @property
    def opening_s(self) -> float:
        return self.player.open_s

    def open(self, rate: int, start_at: float | None) -> None:
        self._playback = self.player.open(rate, start_at)

    def write(self, block: np.ndarray) -> bool:
        assert self._playback is not None, "open the sink first"
        return self._playback.write(block)

    def close(self, complete: bool) -> bool:
        playback, self._playback = self._playback, None
        return playback is not None and playback.close(complete)
