"""The speech path: text to audio pieces (the synthesizer), the phrase cache, and captions."""
