"""RAPTOR trees kept beside an index, rebuilt only where their sources changed.

`RaptorIndex` builds trees over a `SlidingWindowIndex`'s
chunks (or over plain texts) and keeps them

* in the index's **source store** as blobs (``put_blob``/``get_blob``: one
  `to_bytes` blob per tree -- JSON + ``.npy``, no pickle -- and
  a JSON manifest), so they live and travel with the index; or
* in a folder (`RaptorIndex.save` / `RaptorIndex.load`: ``manifest.json``
  and one ``tree.json`` + ``embeddings.npy`` folder per tree); or only in memory.

Two scopes:

* ``scope="document"`` (default): one tree per source (RAPTOR builds one per document).
  **Incremental**: a build re-builds only the trees whose source changed (its content
  hash) or is new, reuses the others as stored, and drops those of removed sources.
  Retrieval searches the forest (all trees' nodes at once).
* ``scope="corpus"``: one tree over the leaves of all sources, so clusters may join
  passages of different documents. **Not incremental**: the clustering of every layer
  depends on all nodes (UMAP and the mixtures are fitted on the whole layer), so any
  change re-clusters the whole corpus. LLM summaries are still cached by their inputs,
  so clusters that come out with the same members are not summarised again.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from swrag_integrations.methods.raptor.build import BuildReport, TreeBuilder, TreeConfig
from swrag_integrations.methods.raptor.leaves import INDEX_LEVELS, leaves_from_index, leaves_from_text
from swrag_integrations.methods.raptor.tree import RaptorTree
from swrag_integrations.core.paths import private_dir

__all__ = ["RaptorIndex", "SCOPES"]

SCOPES = ("document", "corpus")
MANIFEST_FORMAT = 1


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class RaptorIndex:
    """RAPTOR trees over an index's chunks (or over texts), persisted and incremental.

    Args:
        index: a `SlidingWindowIndex`; leaves come
            from its complete sources, trees go into its source store. ``None``: give
            the texts to `build`.
        store: where trees are kept instead (anything with ``get_blob``/``put_blob``);
            default: ``index.store``, or memory only without an index.
        name: the trees' name in the store (several RAPTOR setups can coexist).
        embeddings: LangChain ``Embeddings`` (default: the index's, else the bundled MiniLM).
        summarizer: `ExtractiveSummarizer` (default) or
            `LLMSummarizer`.
        config: `TreeConfig`.
        scope: ``"document"`` (a tree per source, incremental) or ``"corpus"``.
        leaves: with an index: ``"small"``, ``"medium"`` or ``"window"``
            (`leaves_from_index`); without: a dict of
            `leaves_from_text` options (default ``{"strategy": "chunks",
            "size": 100}``, RAPTOR's 100-token leaves).
        show_progress: progress bars.

    Raises:
        ValueError: ``scope``, ``name`` or ``leaves`` is not one the index accepts (the
            message names it).
        TypeError: ``store`` has no ``get_blob``/``put_blob``.
    """

    def __init__(self, index: Any = None, *, store: Any = None, name: str = "raptor", embeddings: Any = None,
                 summarizer: Any = None, config: TreeConfig | None = None, scope: str = "document",
                 leaves: str | Mapping[str, Any] | None = None, show_progress: bool = True) -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        if not name or any(c in name for c in "/\\ "):
            raise ValueError(f"name must be non-empty without '/', '\\' or spaces, got {name!r}")
        index = getattr(index, "engine", index)  # a face (SlidingWindowIndex) stands for its engine
        self.index = index
        self.store = store if store is not None else getattr(index, "store", None)
        if self.store is not None and not (callable(getattr(self.store, "get_blob", None))
                                           and callable(getattr(self.store, "put_blob", None))):
            raise TypeError(f"store needs get_blob/put_blob, got {type(self.store).__name__}")
        self.name = name
        self.scope = scope
        if index is not None:
            leaves = "small" if leaves is None else leaves
            if leaves not in INDEX_LEVELS:
                raise ValueError(f"leaves must be one of {INDEX_LEVELS} with an index, got {leaves!r}")
        else:
            leaves = dict({"strategy": "chunks", "size": 100}, **dict(leaves or {}))
        self.leaves = leaves
        if embeddings is None:
            if index is not None:
                embeddings = index.vectors.embedding
            else:
                from swrag_integrations.embeddings.minilm import default_embeddings

                embeddings = default_embeddings()
        self.embeddings = embeddings
        encoding = index.encoding_name if index is not None else None
        kwargs = {"encoding_name": encoding} if encoding else {}
        self.builder = TreeBuilder(embeddings, summarizer, config, show_progress=show_progress, **kwargs)
        self.encoding_name = self.builder.encoding_name
        self.show_progress = show_progress
        self._trees: dict[str, RaptorTree] = {}
        self._entries: dict[str, dict[str, Any]] = {}
        self._merged: RaptorTree | None = None
        self.last_report = BuildReport()
        if self.store is not None:
            self._read_manifest()

    # ------------------------------------------------------------------ naming
    @property
    def settings(self) -> dict[str, Any]:
        """Everything a stored tree must match to be reused."""
        return {"scope": self.scope, "leaves": self.leaves, **self.builder.identity}

    def _blob(self, key: str) -> str:
        return f"raptor/{self.name}/tree/{_digest(key)[:24]}"

    @property
    def _manifest_name(self) -> str:
        return f"raptor/{self.name}/manifest"

    # ----------------------------------------------------------------- sources
    def _current(self, texts: Mapping[str, str] | None, source_ids: Sequence[str] | None) -> dict[str, str]:
        """``source_id -> content hash`` of the sources to cover."""
        if self.index is not None:
            if texts is not None:
                raise ValueError("texts are read from the index; give texts only without an index")
            heads = self.index.store.heads()
            current = {sid: h.content_hash for sid, h in heads.items() if h.state == "complete"}
        else:
            if texts is None:
                raise ValueError("without an index, build(texts={source_id: text, ...}) needs the texts")
            if not isinstance(texts, Mapping):
                raise TypeError(f"texts must be a mapping source_id -> text, got {type(texts).__name__}")
            for sid, text in texts.items():
                if not isinstance(text, str):
                    raise TypeError(f"text of source {sid!r} must be a str, got {type(text).__name__}")
            spec = json.dumps(self.leaves, sort_keys=True)
            current = {str(sid): _digest(spec + "\x00" + text) for sid, text in texts.items()}
        if source_ids is not None:
            wanted = set(source_ids)
            current = {s: h for s, h in current.items() if s in wanted}
        return current

    def _leaves(self, sids: Sequence[str], texts: Mapping[str, str] | None) -> list[Any]:
        if self.index is not None:
            return leaves_from_index(self.index, sids, level=str(self.leaves))
        out = []
        for sid in sids:
            out.extend(leaves_from_text(sid, texts[sid], encoding_name=self.encoding_name, **dict(self.leaves)))
        return out

    def _source_lookup(self, texts: Mapping[str, str] | None) -> Any:
        if self.index is not None:
            from swrag_integrations.engine.trace import source_piece

            cache: dict[str, tuple[int, str]] = {}

            def lookup(sid: str) -> tuple[int, str]:  # (base, text): a joined record may start past 0
                if sid not in cache:
                    cache[sid] = source_piece(self.index, sid)
                return cache[sid]

            return lookup
        return {str(k): v for k, v in texts.items()}.__getitem__

    # ------------------------------------------------------------------- build
    def build(self, texts: Mapping[str, str] | None = None, *, source_ids: Sequence[str] | None = None,
              prune: bool = True, force: bool = False) -> BuildReport:
        """Build (or bring up to date) the trees; returns what was done.

        Args:
            texts: ``{source_id: text}`` (only without an index).
            source_ids: only these sources (``prune`` then only drops trees among them).
            prune: drop trees of sources that are gone.
            force: rebuild even unchanged trees.
        """
        started = time.perf_counter()
        report = BuildReport()
        current = self._current(texts, source_ids)
        lookup = self._source_lookup(texts)
        settings = self.settings
        if self.scope == "document":
            todo = [s for s in sorted(current) if force or self._entries.get(s, {}).get("hash") != current[s]
                    or self._entries.get(s, {}).get("settings") != settings]
            report.reused = sum(1 for s in current if s not in todo and s in self._entries)
            for sid in self._progress(todo, "RAPTOR trees"):
                tree = self.builder.build(self._leaves([sid], texts), lookup, report=report, label=sid)
                self._put(sid, tree, {"hash": current[sid], "settings": settings, "sources": [sid]})
            gone = [s for s in self._entries if s not in current and (source_ids is None or s in set(source_ids))]
        else:
            signature = _digest(json.dumps(sorted(current.items())))
            entry = self._entries.get("corpus", {})
            if force or entry.get("hash") != signature or entry.get("settings") != settings:
                tree = self.builder.build(self._leaves(sorted(current), texts), lookup, report=report, label="corpus")
                self._put("corpus", tree, {"hash": signature, "settings": settings, "sources": sorted(current)})
            else:
                report.reused = 1
            gone = [k for k in self._entries if k != "corpus"]
        if prune:
            for key in gone:
                self._drop(key)
                report.removed += 1
        self._write_manifest()
        self._merged = None
        report.seconds = time.perf_counter() - started
        self.last_report = report
        return report

    update = build

    def _progress(self, items: list[str], desc: str) -> Any:
        if not self.show_progress or len(items) < 2:
            return items
        from tqdm.auto import tqdm

        return tqdm(items, desc=desc, unit="tree")

    def _put(self, key: str, tree: RaptorTree, entry: dict[str, Any]) -> None:
        self._trees[key] = tree
        entry = dict(entry, nodes=len(tree), layers=tree.layer_sizes())
        if self.store is not None:
            entry["blob"] = self._blob(key)
            self.store.put_blob(entry["blob"], tree.to_bytes())
        self._entries[key] = entry

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        self._trees.pop(key, None)
        if entry is not None and self.store is not None and entry.get("blob"):
            self.store.put_blob(entry["blob"], None)

    # -------------------------------------------------------------- manifest
    def _write_manifest(self) -> None:
        if self.store is None:
            return
        data = {"format": MANIFEST_FORMAT, "name": self.name, "scope": self.scope, "trees": self._entries}
        self.store.put_blob(self._manifest_name, json.dumps(data, sort_keys=True).encode("utf-8"))

    def _read_manifest(self) -> None:
        raw = self.store.get_blob(self._manifest_name)
        if raw is None:
            return
        data = json.loads(raw.decode("utf-8"))
        if int(data.get("format", 0)) != MANIFEST_FORMAT or data.get("scope") != self.scope:
            return  # another layout or scope: rebuilt on the next build
        self._entries = dict(data.get("trees") or {})

    def _tree(self, key: str) -> RaptorTree | None:
        tree = self._trees.get(key)
        if tree is None and self.store is not None:
            blob = self._entries.get(key, {}).get("blob")
            raw = self.store.get_blob(blob) if blob else None
            if raw is not None:
                tree = RaptorTree.from_bytes(raw)
                self._trees[key] = tree
        return tree

    # ------------------------------------------------------------------ reading
    def keys(self) -> list[str]:
        """Source ids (document scope) or ``["corpus"]`` that have a tree."""
        return sorted(self._entries)

    def get(self, key: str) -> RaptorTree | None:
        """The tree of a source (or ``"corpus"``); ``None`` when there is none."""
        return self._tree(key) if key in self._entries else None

    @property
    def tree(self) -> RaptorTree:
        """All trees as one (the forest the retrievers search)."""
        if self._merged is None:
            trees = [t for t in (self._tree(k) for k in self.keys()) if t is not None]
            self._merged = trees[0] if len(trees) == 1 else RaptorTree.merge(trees, {"trees": len(trees)})
        return self._merged

    def stale(self, texts: Mapping[str, str] | None = None) -> list[str]:
        """Sources whose tree is missing or out of date (document scope), or ``["corpus"]``."""
        current = self._current(texts, None)
        if self.scope == "corpus":
            signature = _digest(json.dumps(sorted(current.items())))
            entry = self._entries.get("corpus", {})
            return [] if entry.get("hash") == signature and entry.get("settings") == self.settings else ["corpus"]
        return [s for s in sorted(current) if self._entries.get(s, {}).get("hash") != current[s]
                or self._entries.get(s, {}).get("settings") != self.settings]

    # ----------------------------------------------------------------- folders
    def save(self, directory: str | Path) -> Path:
        """Write ``manifest.json`` and one folder per tree (``tree.json`` + ``embeddings.npy``)."""
        root = Path(directory)
        private_dir(root)
        entries = {}
        for key in self.keys():
            tree = self._tree(key)
            if tree is None:
                continue
            folder = _digest(key)[:24]
            tree.save(root / folder)
            entries[key] = dict(self._entries[key], folder=folder)
        data = {"format": MANIFEST_FORMAT, "name": self.name, "scope": self.scope, "trees": entries}
        (root / "manifest.json").write_text(json.dumps(data, sort_keys=True, indent=1), encoding="utf-8")
        return root

    def load(self, directory: str | Path) -> "RaptorIndex":
        """Read trees written by `save` (replacing those held)."""
        root = Path(directory)
        path = root / "manifest.json"
        if not path.is_file():
            raise FileNotFoundError(f"no RAPTOR manifest in {root}")
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("scope") != self.scope:
            raise ValueError(f"the trees in {root} have scope {data.get('scope')!r}, this RaptorIndex {self.scope!r}")
        self._entries, self._trees, self._merged = {}, {}, None
        for key, entry in (data.get("trees") or {}).items():
            tree = RaptorTree.load(root / entry["folder"])
            self._put(key, tree, {k: v for k, v in entry.items() if k not in ("folder", "blob")})
        self._write_manifest()
        return self

    # -------------------------------------------------------------- retrievers
    def as_retriever(self, **kwargs: Any) -> Any:
        """A LangChain `RaptorRetriever` over these trees."""
        from swrag_integrations.methods.raptor.langchain import RaptorRetriever

        return RaptorRetriever(raptor=self, **kwargs)

    def as_llama_index_retriever(self, **kwargs: Any) -> Any:
        """A LlamaIndex `RaptorLlamaIndexRetriever` over these trees."""
        from swrag_integrations.methods.raptor.llama_index import RaptorLlamaIndexRetriever

        return RaptorLlamaIndexRetriever(self, **kwargs)

    def search(self, query: str, **kwargs: Any) -> Any:
        """The budgeted `RaptorContext` for ``query`` (see `RaptorSearcher`)."""
        from swrag_integrations.methods.raptor.search import RaptorSearcher

        return RaptorSearcher(self).search(query, **kwargs)
