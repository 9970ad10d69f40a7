"""`fastvoice say` and `fastvoice text`: speak a text (through the running service, or here),
write it, stream it, caption it; or show what a voice will say."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.cli.options import bounded_float, device, log, print_event, read_text, setup, speaker
from daemon.errors import AudioDeviceError, FastvoiceError, RefusedJob

if TYPE_CHECKING:
    from daemon.audio.player import Player
    from daemon.audio.sinks import Sink
    from daemon.config import Config
    from daemon.voices.base import Voice

# `say` options the service's queue does not take: with any of them, `say` speaks on its own.
LOCAL_ONLY_OPTIONS = (
    "raw",
    "device",
    "length_scale",
    "noise_scale",
    "noise_w",
    "sentence_pause",
    "no_cache",
    "captions",
)


def cmd_say(args: argparse.Namespace) -> int:
    text = read_text(args.text)
    local_only = [name for name in LOCAL_ONLY_OPTIONS if getattr(args, name)]
    if not args.local and not local_only:
        from daemon.local_socket import ServiceUnavailable

        try:
            return _say_through_service(args, text)
        except ServiceUnavailable as error:
            if str(error):  # a service is there but did not take the job; none there: silence
                print(f"fastvoice: note: {error}; speaking here", file=sys.stderr)
    return _say_here(args, text)


def _say_through_service(args: argparse.Namespace, text: str) -> int:
    """The job goes to the running service's queue; its events are printed as they come."""
    from daemon.local_socket import hand_to_service

    say: dict[str, Any] = {"text": text, "priority": args.priority}
    optional = {"voice": args.voice, "speaker": args.speaker, "id": args.id, "chime": args.chime}
    say.update({key: value for key, value in optional.items() if value is not None})
    if args.volume != 1.0:
        say["volume"] = args.volume
    try:
        result = hand_to_service(say, args.output is not None, print_event, args.timeout)
    except ConnectionError as error:
        raise FastvoiceError(f"the service lost the job's trail: {error}") from None
    last = result.last
    reason = str(last.get("reason"))  # its exit code, as every interface maps it
    if last["event"] == "rejected":
        raise RefusedJob(last.get("message", "the service rejected the job"), reason)
    if last["event"] != "finished":
        message = last.get("message", last.get("reason"))
        raise RefusedJob(f"the job {last['event']}: {message}", reason)
    if args.output is not None:
        if result.audio is None:
            raise FastvoiceError("the service finished the job but sent no audio")
        from daemon.box.files import save_audio

        save_audio(args.output, result.audio)
    return 0


def _say_here(args: argparse.Namespace, text: str) -> int:
    """Loads the voice in this process and speaks (or writes) the text."""
    import itertools

    from daemon.admin.config_checks import load_on_box
    from daemon.audio.sinks import WavFileSink, deliver
    from daemon.service.settings import Settings
    from daemon.speech.cache import phrase_cache
    from daemon.speech.synthesizer import Synthesizer
    from daemon.voices.base import SpeechOptions

    config = load_on_box(args.config)
    registry, _ = setup(config)
    voice = registry.get(args.voice)
    rate = voice.info.sample_rate
    player = None if args.output is not None or args.raw else _player(config, args.device, rate)
    options = SpeechOptions(
        speaker=args.speaker,
        length_scale=args.length_scale,
        noise_scale=args.noise_scale,
        noise_w=args.noise_w,
        volume=args.volume,
    )
    cache = None if args.no_cache else phrase_cache(config.cache)
    chime = config.sounds.chime_for(args.chime, args.priority)
    if args.captions is not None:
        _check_captions(args.captions, voice)
    synthesizer = Synthesizer(registry, Settings(config), cache)
    streamed = player is not None or args.raw  # a WAV file is written whole
    chunks = synthesizer.synthesize(text, voice.info.name, options, chime=chime, streamed=streamed)
    first = next(chunks)
    sink = _sink(args, config, player)
    clock = synthesizer.word_clock(rate, args.sentence_pause, sink.lead_s)
    pieces = clock.follow(itertools.chain([first], chunks))
    deliver(synthesizer.joined(pieces, rate, args.sentence_pause), [sink], rate)
    if isinstance(sink, WavFileSink):
        log.info("wrote %s: %.2f s at %d Hz", args.output, sink.frames / rate, rate)
    if args.captions is not None:
        from daemon.speech import captions

        captions.save(args.captions, captions.cues(_written(text), clock.words))
        log.info("wrote %s: %d cues", args.captions, len(clock.words))
    return 0


def _player(config: Config, device: str | int | None, rate: int) -> Player:
    """The box's player (`--device` over `audio.device`); refused where the config says there
    is no sound card."""
    from daemon.audio.player import NO_DEVICE_HINT, Player
    from daemon.config.audio import NO_DEVICE

    player = Player.from_config(config.audio, device=device)
    if player.device == NO_DEVICE:
        raise AudioDeviceError(f"audio.device is none (no sound card); {NO_DEVICE_HINT}")
    target = player.target(rate)
    log.info("playing on %s at %d Hz", target.name, target.sample_rate)
    return player


def _check_captions(path: Path, voice: Voice) -> None:
    """A captions file whose name gives a format, of a voice that times its words: refused
    before any audio."""
    from daemon.speech.captions import form_of

    form_of(path)
    if not voice.times_words:
        raise FastvoiceError(
            f"voice {voice.info.name!r} gives no word timings for --captions: they come "
            "from its encoder artifact (run `fastvoice build`)"
        )


def _sink(args: argparse.Namespace, config: Config, player: Player | None) -> Sink:
    """Where `say` here sends its audio: stdout (`--raw`), a WAV file (`-o`), or the device
    with the config's lead-in and tail, as the service plays it."""
    from daemon.audio.sinks import DeviceSink, Padded, RawPcmSink, WavFileSink

    if args.raw:
        return RawPcmSink()
    if player is None:
        return WavFileSink(args.output)
    audio = config.audio
    return Padded(DeviceSink(player), audio.lead_in_ms / 1000, audio.tail_ms / 1000)


def _written(text: str) -> str | None:
    """The text captions show, where it is plain text (SSML: the words as said)."""
    from daemon.text.ssml import is_ssml

    return None if is_ssml(text) else text


def cmd_text(args: argparse.Namespace) -> int:
    """One line per utterance, as the voice will say it; pauses on lines of their own."""
    from daemon.admin.config_checks import load_on_box
    from daemon.service.settings import Settings
    from daemon.speech.synthesizer import Synthesizer
    from daemon.text.script import Utterance, describe

    config = load_on_box(args.config)
    registry, _ = setup(config)
    synthesizer = Synthesizer(registry, Settings(config))
    voice = registry.require(args.voice)
    text = read_text(args.text)
    for item in synthesizer.script(text, voice, ssml=args.ssml):
        print(describe(item, voice))
        if args.phonemes and isinstance(item, Utterance):
            spoken = registry.get(item.voice)
            phonemize = getattr(spoken, "phonemes", None)
            if phonemize is None:
                print(f"    (voice {item.voice} does not speak through phonemes)")
                continue
            for sentence in phonemize(item.parts):
                print("    " + "".join(sentence))
    if args.timings:
        _print_timings(synthesizer, text, voice, args.ssml)
    return 0


def _print_timings(synthesizer, text: str, voice: str, ssml: bool) -> None:
    """When each word is heard (seconds from the start of the audio), as captions show it."""
    from daemon.speech import captions

    clock = synthesizer.word_clock(synthesizer.voices.get(voice).info.sample_rate)
    for _ in clock.follow(synthesizer.synthesize(text, voice, ssml=ssml)):
        pass
    if not clock.words:
        print("(the voice gives no word timings)")
    for cue in captions.cues(None if ssml else _written(text), clock.words):
        print(f"{cue.start_s:7.2f} {cue.end_s:7.2f}  {cue.text}")


# Over 60 lines: a table, the commands and their options as `--help` lists them.
def add_commands(commands, common: argparse.ArgumentParser) -> None:
    """`say` and `text`."""
    say = commands.add_parser("say", parents=[common], help="speak a text (or write it to a WAV)")
    say.add_argument("text", help="text to speak, or - to read standard input")
    say.add_argument("--voice", help="voice name (see `fastvoice voices`)")
    say.add_argument("--speaker", type=speaker, help="speaker name or index (multi-speaker voices)")
    output = say.add_mutually_exclusive_group()
    output.add_argument("-o", "--output", type=Path, help="write a WAV file instead of playing")
    output.add_argument(
        "--raw", action="store_true", help="stream 16-bit mono PCM to stdout instead of playing"
    )
    say.add_argument("--device", type=device, help="output device name or index")
    say.add_argument(
        "--captions",
        type=Path,
        metavar="FILE",
        help="write the words' timings too: FILE.vtt (WebVTT), FILE.srt or FILE.json",
    )
    say.add_argument(
        "--length-scale", type=bounded_float(0, 5, low_inclusive=False), help="> 1 is slower"
    )
    say.add_argument("--noise-scale", type=bounded_float(0, 2), help="generator noise")
    say.add_argument("--noise-w", type=bounded_float(0, 2), help="phoneme width noise")
    say.add_argument("--volume", type=bounded_float(0, 1), default=1.0, help="0 to 1 (default 1)")
    say.add_argument("--sentence-pause", type=bounded_float(0, 5), help="seconds between sentences")
    say.add_argument(
        "--no-cache", action="store_true", help="neither use nor fill the phrase cache"
    )
    say.add_argument(
        "--priority",
        default="normal",
        choices=["low", "normal", "high", "critical"],
        help="queue order when a service runs on this box (default normal)",
    )
    say.add_argument("--id", help="job id when a service runs on this box (default: generated)")
    say.add_argument(
        "--chime",
        help="sound before the speech: dingdong, attention, alarm, a file's name in sounds.dir, "
        "or none (default: the config's sounds.chime_by_priority)",
    )
    say.add_argument(
        "--timeout",
        type=bounded_float(0, 86_400, low_inclusive=False),
        default=600,
        help="seconds to follow a job the service has queued (default 600)",
    )
    say.add_argument(
        "--local",
        action="store_true",
        help="speak in this process even when a service runs on this box (which otherwise "
        "queues the job; --raw, --device, --no-cache and the scale and pause options imply it)",
    )
    say.set_defaults(handler=cmd_say)

    text = commands.add_parser(
        "text",
        parents=[common],
        help="print what a voice will say: the words after normalisation, SSML and the lexicon",
    )
    text.add_argument("text", help="text or SSML, or - to read standard input")
    text.add_argument("--voice", help="voice name (see `fastvoice voices`)")
    text.add_argument("--phonemes", action="store_true", help="print the phonemes too")
    text.add_argument(
        "--timings",
        action="store_true",
        help="synthesize, and print when each word is heard (as captions show it)",
    )
    text.add_argument(
        "--ssml", action="store_true", help="read the text as SSML even without <speak>"
    )
    text.set_defaults(handler=cmd_text)
