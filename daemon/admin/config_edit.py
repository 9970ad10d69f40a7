"""One setting written into the config file the box runs with, the rest of the file (its
comments, its order) left as the operator wrote it; the result is checked before it replaces
the file, so a box is never left with a config it cannot load."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from daemon.admin.config_checks import load_on_box
from daemon.box.files import replaced_atomically
from daemon.errors import ConfigError


def set_block_setting(path: Path, block: str, key: str, value: int) -> None:
    """`block.key: value` in the YAML file at `path` (block style, as our examples are):
    the key's line replaced, else added under the block, else the block added at the end.
    ConfigError naming the file when it cannot be done, or the result would not load."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines()
    block_at = next(
        (n for n, line in enumerate(lines) if re.match(rf"{block}:\s*(#.*)?$", line)), None
    )
    if block_at is None:
        if re.search(rf"^{block}:", text, re.MULTILINE):
            raise ConfigError(
                f"{path}: `{block}:` is written in flow style; add `{key}: {value}` to it by hand"
            )
        lines += [f"{block}:", f"  {key}: {value}"]
    else:
        body_end = next(
            (n for n in range(block_at + 1, len(lines)) if re.match(r"\S", lines[n])), len(lines)
        )
        body = range(block_at + 1, body_end)
        found = next((n for n in body if re.match(rf"\s+{key}:", lines[n])), None)
        if found is not None:
            indent = lines[found][: len(lines[found]) - len(lines[found].lstrip())]
            comment = re.search(r"\s+#.*$", lines[found])
            lines[found] = f"{indent}{key}: {value}{comment.group(0) if comment else ''}"
        else:
            indented = next((lines[n] for n in body if lines[n].strip()), "  ")
            indent = indented[: len(indented) - len(indented.lstrip())] or "  "
            lines.insert(block_at + 1, f"{indent}{key}: {value}")
    written = ("\n".join(lines) + "\n").encode("utf-8")
    with tempfile.NamedTemporaryFile(
        dir=path.parent, prefix=f".{path.name}.", suffix=".yaml"
    ) as trial:
        trial.write(written)
        trial.flush()
        try:
            load_on_box(Path(trial.name))
        except ConfigError as error:
            problem = str(error).removeprefix(f"{trial.name}:").strip()
            raise ConfigError(f"{path}: not changed: {problem}") from None
    before = path.stat() if path.exists() else None
    with replaced_atomically(path, mode=None if before is None else before.st_mode & 0o7777) as out:
        out.write(written)
    if before is not None and hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(path, before.st_uid, before.st_gid)  # the service's group may still read it
