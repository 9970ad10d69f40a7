"""CosyVoice 2 voices, from a voice pack (daemon/voices/voice_pack.py) on our backends.

Text → Qwen BPE tokens → speech tokens from the LLM (one graph per step, the KV cache passed
back in; RAS sampling) → mel frames from the flow (encoder, then 10 Euler steps of the
estimator on a cosine schedule with classifier-free guidance) → waveform from HiFT (source and
magnitude/phase graphs, numpy iSTFT). Streaming follows the reference schedule: a chunk as soon
as 25 tokens (the first padded so that prompt + chunk is a multiple of 25) and 3 of lookahead
are there, each chunk `token_hop_growth` times the last up to `max_token_hop`; the flow re-runs
the whole prefix with the chunk-causal graphs, HiFT keeps the last 8 mel frames and their
source and cross-fades the joins; the last chunk runs the whole-utterance graphs. Everything a
request changes lives in its `_Utterance`: concurrent requests share nothing mutable.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from daemon.audio.piece import AudioPiece
from daemon.config import CosyVoice2VoiceConfig
from daemon.errors import VoiceError
from daemon.runtime.artifacts import source_identity
from daemon.runtime.base import Backend, Stage
from daemon.text.script import Part, Utterance, join_words
from daemon.voices.base import SpeechOptions, Voice, VoiceInfo
from daemon.voices.hift import istft
from daemon.voices.sampling import Draws, ras_sample
from daemon.voices.voice_pack import (
    GRAPHS,
    MANIFEST,
    TOKENIZER,
    SpeakerPrompt,
    VoicePack,
    graph_file,
    llm_cache_names,
)

# The LLM speaks at least MIN_RATIO and at most MAX_RATIO speech tokens per text token.
MIN_RATIO = 2
MAX_RATIO = 20
MAX_TRIALS = 100  # draws that may come back "end" before the minimum length, then an error
# Longer texts are spoken in pieces of at most this many text tokens (as the reference
# frontend splits them): the LLM was trained on sentences, not paragraphs.
MAX_TEXT_TOKENS = 80
MEL_CACHE_FRAMES = 8  # HiFT's cache between streamed chunks; its samples are cross-faded
NOT_TAKEN = ("length_scale", "noise_scale", "noise_w", "rate")


class CosyVoice2Voice(Voice):
    def __init__(self, name: str, config: CosyVoice2VoiceConfig, backend: Backend) -> None:
        from tokenizers import Tokenizer

        self.name = name
        self.config = config
        self.pack = VoicePack.open(config.pack)
        manifest = self.pack.manifest
        self._identity = {
            "family": "cosyvoice2",
            "pack": source_identity(config.pack / MANIFEST),
            "config": config.model_dump(mode="json"),
        }
        self.dims = _Dims(manifest)
        self.tokenizer = Tokenizer.from_file(str(self.pack.path(TOKENIZER)))
        self.text_embedding = self.pack.table("text_embedding")
        self.speech_embedding = self.pack.table("speech_embedding")
        self.llm_embedding = self.pack.table("llm_embedding")
        self.projection = (
            np.asarray(self.pack.table("speaker_projection_weight")),
            np.asarray(self.pack.table("speaker_projection_bias")),
        )
        self.flow_noise = self.pack.table("flow_noise")
        self.stages: dict[str, Stage] = {
            graph: backend.load(self.pack.path(graph_file(graph)), f"{name}/{graph}")
            for graph in GRAPHS
        }
        self.default_speaker = self._speaker_name(config.speaker)
        self.speakers = {s: self.pack.speaker(s) for s in self.pack.speakers}
        self.info = VoiceInfo(
            name=name,
            family="cosyvoice2",
            language=str(manifest.get("language", "mul")),
            sample_rate=self.dims.sample_rate,
            speakers=tuple(self.pack.speakers),
            stages=tuple(stage.report for stage in self.stages.values()),
        )

    def identity(self) -> dict[str, Any]:
        return self._identity

    def _speaker_name(self, speaker: str | int | None) -> str:
        names = self.pack.speakers
        if speaker is None:
            return names[0]
        if isinstance(speaker, str) and speaker in names:
            return speaker
        index = speaker if isinstance(speaker, int) else int(speaker) if speaker.isdigit() else -1
        if 0 <= index < len(names):
            return names[index]
        raise VoiceError(
            f"voice {self.name!r}: unknown speaker {speaker!r} (the pack has: {', '.join(names)})"
        )

    def text_tokens(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def synthesize_sentence(
        self, sentence: str | tuple[Part, ...], options: SpeechOptions
    ) -> Iterator[AudioPiece]:
        self.refuse_unused(options, NOT_TAKEN)
        if not isinstance(sentence, str):
            self.check_utterance(Utterance(sentence))
            sentence = join_words(str(part) for part in sentence)
        speaker = self.speakers[
            self.default_speaker if options.speaker is None else self._speaker_name(options.speaker)
        ]
        tokens = self.text_tokens(sentence.strip()) if sentence.strip() else []
        pieces = max(1, math.ceil(len(tokens) / MAX_TEXT_TOKENS)) if tokens else 0
        size = math.ceil(len(tokens) / max(pieces, 1))
        for index in range(pieces):
            text = tokens[index * size : (index + 1) * size]
            utterance = _Utterance(self, speaker, Draws(self.config.seed))
            chunks = utterance.speak(text, self.config.streaming)
            last_piece = index == pieces - 1
            for samples, last_chunk in chunks:
                yield AudioPiece(samples, last_piece and last_chunk)


class _Dims:
    """The model's numbers, from the pack's manifest."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        try:
            llm, flow, hift = manifest["llm"], manifest["flow"], manifest["hift"]
            self.sample_rate = int(manifest["sample_rate"])
            self.layers, self.kv_heads = int(llm["layers"]), int(llm["kv_heads"])
            self.head_dim, self.speech_tokens = int(llm["head_dim"]), int(llm["speech_tokens"])
            self.pre_lookahead, self.mel_ratio = int(flow["pre_lookahead"]), int(flow["mel_ratio"])
            self.chunk_tokens, self.timesteps = int(flow["chunk_tokens"]), int(flow["timesteps"])
            self.cfg_rate = float(flow["cfg_rate"])
            self.n_fft, self.hop = int(hift["n_fft"]), int(hift["hop"])
            self.samples_per_frame, self.harmonics = (
                int(hift["samples_per_frame"]),
                int(hift["harmonics"]),
            )
            self.audio_limit = float(hift["audio_limit"])
        except (KeyError, TypeError, ValueError) as error:
            raise VoiceError(f"{MANIFEST}: bad or missing model dimension {error}") from None
        self.past_names, present = llm_cache_names(self.layers)
        self.present_names = frozenset(present)


class _Utterance:
    """One piece of text being spoken: its draws, its speech tokens, its HiFT cache."""

    def __init__(self, voice: CosyVoice2Voice, speaker: SpeakerPrompt, draws: Draws) -> None:
        self.voice = voice
        self.dims = voice.dims
        self.speaker = speaker
        self.draws = draws
        self.hift_cache: dict[str, np.ndarray] | None = None
        embedding = speaker.embedding.astype(np.float32).reshape(1, -1)
        embedding = embedding / max(float(np.linalg.norm(embedding)), 1e-12)
        weight, bias = voice.projection
        self.speaker_vector = (embedding @ weight.T + bias).astype(np.float32)

    def speak(self, text: list[int], streaming: bool) -> Iterator[tuple[np.ndarray, bool]]:
        """(samples, last) chunk by chunk: several when streaming, one otherwise."""
        lookahead, chunk = self.dims.pre_lookahead, self.dims.chunk_tokens
        prompt = len(self.speaker.flow_prompt_tokens)
        first_pad = math.ceil(prompt / chunk) * chunk - prompt
        hop, offset, tokens = chunk, 0, []
        for token in self.speech_tokens(text):
            tokens.append(token)
            this_hop = hop + first_pad if offset == 0 else hop
            while streaming and len(tokens) - offset >= this_hop + lookahead:
                mel = self.mel(tokens[: offset + this_hop + lookahead], finalize=False)
                yield (
                    self.waveform(mel[:, :, offset * self.dims.mel_ratio :], finalize=False),
                    False,
                )
                offset += this_hop
                hop = min(self.voice.config.max_token_hop, hop * self.voice.config.token_hop_growth)
                this_hop = hop
        if not tokens:
            raise VoiceError(f"voice {self.voice.name!r}: the LLM made no speech tokens")
        mel = self.mel(tokens, finalize=True)
        yield self.waveform(mel[:, :, offset * self.dims.mel_ratio :], finalize=True), True

    def speech_tokens(self, text: list[int]) -> Iterator[int]:
        """The LLM loop: [sos, prompt text + text, task id, prompt speech tokens] first, then
        each token drawn fed back in, the KV cache carried from step to step."""
        voice, dims, speaker = self.voice, self.dims, self.speaker
        ids = np.concatenate([speaker.prompt_text, text]).astype(np.int64)
        step = np.concatenate(
            [
                voice.llm_embedding[0:1],
                voice.text_embedding[ids],
                voice.llm_embedding[1:2],
                voice.speech_embedding[speaker.llm_prompt_tokens.astype(np.int64)],
            ]
        )[None].astype(np.float32)
        shape = (1, dims.kv_heads, 0, dims.head_dim)
        past = {name: np.zeros(shape, np.float32) for name in dims.past_names}
        end = dims.speech_tokens  # ids above it are other stop tokens: skipped
        decoded: list[int] = []
        length = 0
        llm = voice.stages["llm_step"]
        for index in range(MAX_RATIO * len(text)):
            length += step.shape[1]
            logp, *present = llm.run_kept(
                {"inputs_embeds": step, "attention_mask": np.ones((1, length), np.int64), **past},
                keep=dims.present_names,  # the cache stays with the backend between steps
            )
            past = dict(zip(dims.past_names, present, strict=True))
            token = self._sample(logp[0], decoded, ignore_end=index < MIN_RATIO * len(text))
            if token == end:
                return
            if token > end:
                continue
            decoded.append(token)
            yield token
            step = voice.speech_embedding[token][None, None].astype(np.float32)

    def _sample(self, logp: np.ndarray, decoded: list[int], ignore_end: bool) -> int:
        for _ in range(MAX_TRIALS + 1):
            token = ras_sample(logp, decoded, self.draws)
            if not ignore_end or token != self.dims.speech_tokens:
                return token
        raise VoiceError(
            f"voice {self.voice.name!r}: the LLM kept ending the speech before its minimum "
            f"length ({MAX_TRIALS + 1} draws)"
        )

    def mel(self, tokens: list[int], finalize: bool) -> np.ndarray:
        """Mel frames [1, 80, frames] of `tokens` after the prompt's: the flow over prompt +
        tokens. Not `finalize`: a streamed chunk, its last tokens read as lookahead only."""
        voice, dims = self.voice, self.dims
        ids = np.concatenate([self.speaker.flow_prompt_tokens, tokens]).astype(np.int64)[None]
        if finalize:
            (mu,) = voice.stages["flow_encoder"].run({"token": ids})
        else:
            split = ids.shape[1] - dims.pre_lookahead
            (mu,) = voice.stages["flow_encoder_chunk"].run(
                {"token": ids[:, :split], "context": ids[:, split:]}
            )
        frames = mu.shape[2]
        if frames > voice.flow_noise.shape[2]:
            raise VoiceError(
                f"voice {voice.name!r}: {frames} mel frames is above the flow's "
                f"{voice.flow_noise.shape[2]}: speak a shorter text"
            )
        prompt_frames = self.speaker.prompt_mel.shape[0]
        cond = np.zeros((1, mu.shape[1], frames), np.float32)
        cond[0, :, :prompt_frames] = self.speaker.prompt_mel.T
        estimator = voice.stages["flow_estimator" if finalize else "flow_estimator_chunk"]
        self._check_fits(estimator, mel_frames=frames)
        x = np.array(voice.flow_noise[:, :, :frames], np.float32)
        zeros = np.zeros_like(mu)
        feeds = {
            "mask": np.ones((2, 1, frames), np.float32),
            "mu": np.concatenate([mu, zeros]),
            "spks": np.concatenate([self.speaker_vector, np.zeros_like(self.speaker_vector)]),
            "cond": np.concatenate([cond, zeros]),
        }
        schedule = np.linspace(0, 1, dims.timesteps + 1, dtype=np.float32)
        schedule = (1 - np.cos(schedule * np.float32(0.5 * np.pi))).astype(np.float32)
        t, dt = schedule[0], schedule[1] - schedule[0]
        guided, unguided = np.float32(1 + dims.cfg_rate), np.float32(dims.cfg_rate)
        for step in range(1, dims.timesteps + 1):
            (velocity,) = estimator.run(
                {**feeds, "x": np.concatenate([x, x]), "t": np.full(2, t, np.float32)}
            )
            x = x + dt * (guided * velocity[:1] - unguided * velocity[1:])
            t = t + dt
            if step < dims.timesteps:
                dt = schedule[step + 1] - t
        return x[:, :, prompt_frames:]

    def _check_fits(self, stage: Stage, **sizes: int) -> None:
        """A TensorRT engine runs up to its profile's largest shape: a longer piece is a clear
        error, not a failed run."""
        for dim, size in sizes.items():
            limit = stage.limits.get(dim)
            if limit is not None and size > limit:
                raise VoiceError(
                    f"voice {self.voice.name!r}: {size} {dim} is above the {limit} of "
                    f"{stage.report.stage}'s engine (raise gpu.profiles.{dim}.max and run "
                    "`fastvoice build`, or speak shorter sentences)"
                )

    def waveform(self, mel: np.ndarray, finalize: bool) -> np.ndarray:
        """Samples of `mel` by HiFT; a streamed chunk keeps its end as the next one's cache."""
        voice, dims = self.voice, self.dims
        cache = self.hift_cache
        if cache is not None:
            mel = np.concatenate([cache["mel"], mel], axis=2)
        samples = mel.shape[2] * dims.samples_per_frame
        for graph in ("hift_source", "hift_magnitude_phase"):
            self._check_fits(voice.stages[graph], mel_frames=mel.shape[2], samples=samples)
        (source,) = voice.stages["hift_source"].run(
            {
                "speech_feat": mel,
                "initial_phases": self.draws.phases(dims.harmonics),
                "noise": self.draws.noise(samples, dims.harmonics),
            }
        )
        if cache is not None:
            source[:, :, : cache["source"].shape[2]] = cache["source"]
        magnitude, phase = voice.stages["hift_magnitude_phase"].run(
            {"speech_feat": mel, "source": source}
        )
        speech = istft(magnitude, phase, dims.n_fft, dims.hop)
        speech = np.clip(speech, -dims.audio_limit, dims.audio_limit)
        overlap = MEL_CACHE_FRAMES * dims.samples_per_frame
        if cache is not None:
            window = np.hamming(2 * overlap)
            speech[:, :overlap] = (
                speech[:, :overlap] * window[:overlap] + cache["speech"] * window[overlap:]
            )
        if not finalize:
            self.hift_cache = {
                "mel": mel[:, :, -MEL_CACHE_FRAMES:],
                "source": source[:, :, -overlap:],
                "speech": speech[:, -overlap:],
            }
            speech = speech[:, :-overlap]
        return speech[0].astype(np.float32)
