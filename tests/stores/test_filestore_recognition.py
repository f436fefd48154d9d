"""Which byte stores get atomic writes: LangChain's LocalFileStore (and subclasses that keep its
mset), recognised without importing LangChain in stores.filestore (issue 40)."""

from __future__ import annotations

from langchain_classic.storage import LocalFileStore
from langchain_core.stores import InMemoryByteStore

from swrag_integrations.stores.filestore import AtomicFileStore, atomic_byte_store


class KeepsMset(LocalFileStore):
    pass


class OwnMset(LocalFileStore):
    def mset(self, key_value_pairs):
        super().mset(key_value_pairs)


def test_local_file_stores_are_wrapped_and_others_are_not(tmp_path):
    wrapped = atomic_byte_store(LocalFileStore(tmp_path / "a"))
    assert isinstance(wrapped, AtomicFileStore)
    wrapped.mset([("k", b"v")])
    assert wrapped.mget(["k"]) == [b"v"] and (tmp_path / "a" / "k").read_bytes() == b"v"
    assert isinstance(atomic_byte_store(KeepsMset(tmp_path / "b")), AtomicFileStore)
    own = OwnMset(tmp_path / "c")
    assert atomic_byte_store(own) is own
    memory = InMemoryByteStore()
    assert atomic_byte_store(memory) is memory
    impostor = type("LocalFileStore", (), {"mset": lambda self, pairs: None, "root_path": str(tmp_path)})()
    assert atomic_byte_store(impostor) is impostor
