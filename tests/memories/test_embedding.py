"""The embedder (SPEC §3.2): wordllama's own model, loaded offline and once, unit vectors,
no vector for text without a token, and a clear line in the log when it cannot load."""

import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest

from memories import embedding
from memories.embedding import WordLlama, embedder_named
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
from memories.embedding import WordLlama
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


def test_an_embedder_that_cannot_load_is_said_once_and_recall_goes_on_by_words(monkeypatch, caplog):
    class Broken:
        name = "broken"
        dimension = 1

        def load(self) -> None:
            raise OSError("weights missing")

    monkeypatch.setitem(embedding._PROVIDERS, "broken", Broken)
    monkeypatch.setattr(embedding, "_loaded", {})
    with caplog.at_level(logging.WARNING, logger="memories.embedding"):
        assert embedder_named("broken") is None
        assert embedder_named("broken") is None
    [record] = caplog.records
    assert "could not be loaded" in record.getMessage()
    assert "words alone" in record.getMessage()


def test_none_means_no_embedder():
    assert embedder_named("none") is None


def test_the_model_is_loaded_once_per_process():
    assert embedder_named("wordllama") is embedder_named("wordllama")
