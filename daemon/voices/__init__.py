"""Voices: text frontend + model stages, built from config. Voices never know their backend."""
