"""`fastvoice export cosyvoice2 MODEL_DIR OUT_DIR`: a CosyVoice 2 voice pack (the format is in
daemon/voices/voice_pack.py) from a model directory, or from model objects in memory.

A model directory is what CosyVoice 2 ships: `cosyvoice2.yaml` (HyperPyYAML), `llm.pt`,
`flow.pt`, `hift.pt`, the Qwen tokenizer in `CosyVoice-BlankEN/`, and the speakers in
`spk2info.pt` as CosyVoice's own `add_zero_shot_spk` and `save_spkinfo` write them (prompt
tokens, prompt mel, speaker embedding: computing those needs CosyVoice's frontend models).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daemon.errors import FastvoiceError
from daemon.runtime.artifacts import FAST_HASH, fast_hash_file, sha256_file
from daemon.voices.voice_pack import (
    FORMAT,
    MANIFEST,
    SPEAKERS,
    TOKENIZER,
    SpeakerPrompt,
    graph_file,
    speaker_file,
    table_file,
)
from edge_build import cosyvoice2_export as export
from edge_build.artifact_writer import utc_now

log = logging.getLogger(__name__)
YAML = "cosyvoice2.yaml"
QWEN_DIR = "CosyVoice-BlankEN"
SPEAKER_INFO = "spk2info.pt"
# What the pack needs of the model's YAML: the three models and the plain values they refer
# to. The rest (training data pipeline, GAN discriminators, feature extractors) names modules
# that need torchaudio, pyarrow or pyworld, and is left unread.
MODEL_KEYS = ("llm", "flow", "hift")
# The reference's speaker prompt format (spk2info.pt) → the pack's.
SPEAKER_INFO_KEYS = {
    "prompt_text": "prompt_text",
    "llm_prompt_tokens": "llm_prompt_speech_token",
    "flow_prompt_tokens": "flow_prompt_speech_token",
    "prompt_mel": "prompt_speech_feat",
    "embedding": "flow_embedding",
}
FLOW_TIMESTEPS = 10


class ExportError(FastvoiceError):
    """The model directory or the models cannot make a voice pack."""

    exit_code = 2


@dataclass
class CosyVoice2Models:
    llm: Any  # cosyvoice.llm.llm.Qwen2LM
    flow: Any  # cosyvoice.flow.flow.CausalMaskedDiffWithXvec
    hift: Any  # cosyvoice.hifigan.generator.HiFTGenerator


def export_model_dir(model_dir: Path, out: Path, language: str = "mul") -> Path:
    """The whole export of a CosyVoice 2 model directory."""
    models = load_models(model_dir)
    speakers = load_speakers(model_dir / SPEAKER_INFO)
    with tempfile.TemporaryDirectory() as temp:
        tokenizer = tokenizer_json(model_dir / QWEN_DIR, Path(temp) / TOKENIZER)
        source = {"model_dir": str(model_dir.resolve())}
        return write_voice_pack(models, tokenizer, speakers, out, source, language)


def model_yaml(text: str) -> str:
    """The part of cosyvoice2.yaml that builds the models: their blocks, and the top-level
    plain values (no `!` tag other than `!ref`) they may refer to."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"[A-Za-z_]", line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    kept = []
    for block in blocks:
        key, _, value = block[0].partition(":")
        plain = len(block) == 1 or all(
            not line.strip() or line.lstrip().startswith("#") for line in block[1:]
        )
        tags = re.findall(r"!(\w+)", value.split("#")[0])
        if key in MODEL_KEYS or (plain and all(tag == "ref" for tag in tags)):
            kept.extend(block)
    return "\n".join(kept) + "\n"


def load_models(model_dir: Path) -> CosyVoice2Models:
    import torch
    from hyperpyyaml import load_hyperpyyaml

    export.import_cosyvoice()
    for name in (YAML, "llm.pt", "flow.pt", "hift.pt"):
        if not (model_dir / name).is_file():
            raise ExportError(f"{model_dir}: no {name}; is this a CosyVoice 2 model directory?")
    text = (model_dir / YAML).read_text(encoding="utf-8")
    try:
        configs = load_hyperpyyaml(
            model_yaml(text), overrides={"qwen_pretrain_path": str(model_dir / QWEN_DIR)}
        )
    except Exception as error:  # HyperPyYAML raises whatever the classes it builds raise
        raise ExportError(f"{model_dir / YAML}: cannot build the models: {error}") from error
    missing = [key for key in MODEL_KEYS if key not in configs]
    if missing:
        raise ExportError(f"{model_dir / YAML}: no {', '.join(missing)}")
    models = CosyVoice2Models(configs["llm"], configs["flow"], configs["hift"])

    def state(name: str) -> dict:
        weights = torch.load(model_dir / name, map_location="cpu", weights_only=True)
        return {key.removeprefix("generator."): value for key, value in weights.items()}

    models.llm.load_state_dict(state("llm.pt"), strict=True)
    models.flow.load_state_dict(state("flow.pt"), strict=True)
    models.hift.load_state_dict(state("hift.pt"), strict=True)
    for model in (models.llm, models.flow, models.hift):
        model.eval()
    return models


def load_speakers(path: Path) -> dict[str, SpeakerPrompt]:
    """The speakers of a reference `spk2info.pt`: zero-shot ones (prompt and embedding) or SFT
    ones (an embedding alone)."""
    import torch

    if not path.is_file():
        raise ExportError(
            f"no {path}: add a speaker with CosyVoice's add_zero_shot_spk(prompt_text, "
            f"prompt_speech_16k, name) and save_spkinfo(), then export again"
        )
    info = torch.load(path, map_location="cpu", weights_only=True)
    speakers = {}
    for name, entry in info.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", str(name)):
            raise ExportError(f"{path}: speaker name {name!r} is not a plain name")

        def array(key: str, dtype, entry=entry, name=name) -> np.ndarray:
            value = entry.get(SPEAKER_INFO_KEYS[key])
            if value is None and key == "embedding":
                value = entry.get("embedding")  # an SFT speaker
            if value is None and key == "embedding":
                raise ExportError(f"{path}: speaker {name!r} has no embedding")
            if value is None:
                return np.zeros((0, 80) if key == "prompt_mel" else 0, dtype)
            value = value.detach().cpu().numpy().astype(dtype)
            return value.reshape(-1, 80) if key == "prompt_mel" else value.reshape(-1)

        speakers[str(name)] = SpeakerPrompt(
            prompt_text=array("prompt_text", np.int64),
            llm_prompt_tokens=array("llm_prompt_tokens", np.int64),
            flow_prompt_tokens=array("flow_prompt_tokens", np.int64),
            prompt_mel=array("prompt_mel", np.float32),
            embedding=array("embedding", np.float32),
        )
    if not speakers:
        raise ExportError(f"{path}: no speakers")
    return speakers


def tokenizer_json(qwen_dir: Path, out: Path) -> Path:
    """CosyVoice's tokenizer (Qwen's BPE and its added special tokens) as one `tokenizers` file."""
    export.import_cosyvoice()
    from cosyvoice.tokenizer.tokenizer import QwenTokenizer

    try:
        tokenizer = QwenTokenizer(str(qwen_dir), skip_special_tokens=True).tokenizer
    except (OSError, ValueError) as error:
        raise ExportError(f"{qwen_dir}: no Qwen tokenizer: {error}") from error
    tokenizer.backend_tokenizer.save(str(out))
    return out


def manifest_dims(models: CosyVoice2Models) -> dict[str, Any]:
    """The numbers the voice needs, read off the models; a model this runtime cannot run
    faithfully is an error here, not wrong audio later."""
    llm, flow, hift = models.llm, models.flow, models.hift
    qwen = llm.llm.model.config
    decoder = flow.decoder
    if decoder.t_scheduler != "cosine":
        raise ExportError(f"the flow's t_scheduler is {decoder.t_scheduler!r}, not 'cosine'")
    chunk_frames = decoder.estimator.static_chunk_size
    if chunk_frames % flow.token_mel_ratio:
        raise ExportError(f"estimator chunk {chunk_frames} is not a multiple of the mel ratio")
    return {
        "sample_rate": int(hift.sampling_rate),
        "llm": {
            "layers": qwen.num_hidden_layers,
            "kv_heads": qwen.num_key_value_heads,
            "head_dim": qwen.hidden_size // qwen.num_attention_heads,
            "speech_tokens": int(llm.speech_token_size),
        },
        "flow": {
            "pre_lookahead": int(flow.pre_lookahead_len),
            "mel_ratio": int(flow.token_mel_ratio),
            "chunk_tokens": chunk_frames // flow.token_mel_ratio,
            "timesteps": FLOW_TIMESTEPS,
            "cfg_rate": float(decoder.inference_cfg_rate),
        },
        "hift": {
            "n_fft": int(hift.istft_params["n_fft"]),
            "hop": int(hift.istft_params["hop_len"]),
            "samples_per_frame": export.samples_per_frame(hift),
            "harmonics": int(hift.nb_harmonics) + 1,
            "audio_limit": float(hift.audio_limit),
        },
    }


def write_voice_pack(
    models: CosyVoice2Models,
    tokenizer: Path,
    speakers: dict[str, SpeakerPrompt],
    out: Path,
    source: dict[str, Any],
    language: str = "mul",
) -> Path:
    """Exports every graph and table into a new directory beside `out`, then puts it in
    place of `out`: a pack is whole or absent, never half written."""
    if not speakers:
        raise ExportError("a voice pack needs at least one speaker")
    dims = manifest_dims(models)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        _write_graphs(models, work)
        for name, table in _tables(models).items():
            np.save(work / table_file(name), np.ascontiguousarray(table))
        shutil.copyfile(tokenizer, work / TOKENIZER)
        (work / SPEAKERS).mkdir()
        for name, speaker in speakers.items():
            np.savez(work / speaker_file(name), **speaker.arrays())
        manifest = {
            "format": FORMAT,
            "family": "cosyvoice2",
            "language": language,
            **dims,
            "speakers": list(speakers),
            "source": source,
            "created": utc_now(),
            "files": _file_entries(work),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        work.chmod(0o755)  # mkdtemp's 0700 would hide the pack from the service's user
        _replace(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    log.info("wrote the voice pack %s (%d speakers)", out, len(speakers))
    return out


def _write_graphs(models: CosyVoice2Models, work: Path) -> None:
    estimator = models.flow.decoder.estimator
    export.export_llm_step(models.llm, work / graph_file("llm_step"))
    export.export_flow_encoder(models.flow, work / graph_file("flow_encoder"), False, False)
    export.export_flow_encoder(models.flow, work / graph_file("flow_encoder_chunk"), True, True)
    export.export_estimator(estimator, work / graph_file("flow_estimator"), streaming=False)
    export.export_estimator(estimator, work / graph_file("flow_estimator_chunk"), streaming=True)
    export.export_hift(models.hift, work)


def _tables(models: CosyVoice2Models) -> dict[str, np.ndarray]:
    projection = models.flow.spk_embed_affine_layer
    return {
        **export.embedding_tables(models.llm),
        "speaker_projection_weight": projection.weight.detach().numpy(),
        "speaker_projection_bias": projection.bias.detach().numpy(),
        "flow_noise": models.flow.decoder.rand_noise.detach().numpy(),
    }


def _file_entries(directory: Path) -> dict[str, dict[str, Any]]:
    return {
        path.relative_to(directory).as_posix(): {
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
            FAST_HASH: fast_hash_file(path),
        }
        for path in sorted(p for p in directory.rglob("*") if p.is_file())
    }


def _replace(work: Path, out: Path) -> None:
    if out.exists():
        old = out.with_name(f".{out.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        work.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        work.rename(out)
