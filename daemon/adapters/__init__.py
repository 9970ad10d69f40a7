"""Other protocols on top of the same queue and synthesizer: Home Assistant, Hermes, Wyoming."""
