"""Text that is not UTF-8 on the command line is refused at once with a typed error, never a traceback from
deep inside a model or a cache; the embedding cache refuses such text itself too."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.embed.cache import text_key

BAD = b"fever and \xff\xfe cough"
COMMANDS = [
    [b"llm", b"chat", BAD],
    [b"kb", b"search", BAD],
    [b"patients", b"similar", BAD],
    [b"consult", BAD],
    [b"embed", BAD],
    [b"llm", b"choose", b"question", b"-o", BAD, b"-o", b"other"],
]


@pytest.mark.integration
@pytest.mark.parametrize(
    "args", COMMANDS, ids=["llm-chat", "kb-search", "similar", "consult", "embed", "choose"]
)
def test_non_utf8_argument_is_refused_first(args: list[bytes], tmp_path) -> None:
    env = {**os.environ, "CLINRAG_HOME": str(tmp_path), "COLUMNS": "120"}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"clinrag", *args], capture_output=True, env=env, timeout=60
    )
    elapsed = time.monotonic() - started
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "InvalidInputError" in stderr and "not UTF-8" in stderr
    assert "Traceback" not in stderr and "UnicodeEncodeError" not in stderr
    assert elapsed < 10  # refused before any model, index or base is loaded


@pytest.mark.integration
def test_stdin_prompt_that_is_not_utf8_is_refused(tmp_path) -> None:
    env = {**os.environ, "CLINRAG_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "clinrag", "llm", "chat", "-"],
        input=BAD,
        capture_output=True,
        env=env,
        timeout=60,
    )
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2 and "standard input is not UTF-8" in stderr, stderr
    assert "Traceback" not in stderr


def test_embedding_cache_key_refuses_lone_surrogates() -> None:
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        text_key(BAD.decode("utf-8", "surrogateescape"))
    assert len(text_key("fever")) == 64
