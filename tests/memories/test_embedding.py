"""The embedder (SPEC §3.2): wordllama's own model, loaded offline and once, unit vectors,
no vector for text without a token, and one clear error when it cannot load (issue 25)."""

import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest

from memories.recall import embedding
from memories.recall.embedding import EmbedderUnavailable, WordLlama, embedder_named
from tests.live_server import ROOT

OFFLINE_LOAD = """
import logging, socket

def refuse(*args, **kwargs):
    raise AssertionError("the embedder opened a socket")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
logging.basicConfig(level=logging.WARNING, format="TAPROOT %(message)s")
handlers = list(logging.getLogger().handlers)
from memories.recall.embedding import WordLlama
vector = WordLlama().embed(["Cello practice before work"])[0]
assert logging.getLogger().handlers == handlers, "the package changed the root logger"
assert logging.getLogger().level == logging.WARNING
print(len(vector))
"""


def test_the_model_loads_from_its_wheel_without_opening_a_socket():
    """In a process of its own, with every way to open a connection refused."""
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE_LOAD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "256"


def test_vectors_are_unit_length_and_alike_for_alike_text():
    model = WordLlama()
    cello, lessons, report = model.embed(
        ["Cello practice: morning scales", "music lessons", "Quarterly tax report due"]
    )
    for vector in (cello, lessons, report):
        assert vector is not None
        assert vector.dtype == np.float32
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-6)
    assert float(cello @ lessons) > float(cello @ report)


def test_text_without_a_token_has_no_vector_and_warns_of_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model's own normalising would divide by zero
        assert WordLlama().embed(["", "Cello"])[0] is None


def test_an_embedder_that_cannot_load_is_one_clear_error_every_time_logged_once(
    monkeypatch, caplog
):
    """Never a silent fall-back to words alone (issue 25): whoever asks for it is told."""

    class Broken:
        name = "broken"
        dimension = 1

        def check(self) -> None:
            raise OSError("weights missing")

    monkeypatch.setitem(embedding._PROVIDERS, "broken", Broken)
    monkeypatch.setattr(embedding, "_loaded", {})
    with caplog.at_level(logging.WARNING, logger="memories.recall.embedding"):
        for _ in range(2):
            with pytest.raises(EmbedderUnavailable) as refused:
                embedder_named("broken")
            assert "weights missing" in str(refused.value)
            assert "TAPROOT_EMBEDDER" in str(refused.value)
    [record] = caplog.records
    assert record.getMessage() == str(refused.value)


def test_an_unknown_embedder_name_says_which_there_are(monkeypatch):
    monkeypatch.setattr(embedding, "_loaded", {})
    with pytest.raises(EmbedderUnavailable, match="use wordllama, minilm, onnx:PATH or none"):
        embedder_named("bert")


def test_none_means_no_embedder():
    assert embedder_named("none") is None


def test_the_model_is_loaded_once_per_process():
    assert embedder_named("wordllama") is embedder_named("wordllama")
