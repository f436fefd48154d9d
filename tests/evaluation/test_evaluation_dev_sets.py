"""The dev sets of issue 44 (DRCD, five LEval tasks): registered with their modes, split into
disjoint fixed halves like the six older sets, and accepted by the peers harness.

The real files are read from ../shared/data/eval when present (CI: required, see ci_switch)."""

from __future__ import annotations

import hashlib
import json

import pytest

from ci_switch import require_shared
from swrag_integrations.evaluation.datasets import (
    ADDED_DEV_SETS,
    ALL_DEV_SETS,
    DEV_SETS,
    HALF_SALT,
    dev_set_modes,
    load_examples,
)
from swrag_integrations.evaluation.peers.peers import main as peers_main

# rows of the files as described in ../shared/README.md
ROWS = {"drcd_corpus": 1000, "leval_scientific_qa": 153, "leval_natural_question": 109, "leval_multidoc_qa": 158,
        "leval_financial_qa": 68, "leval_legal_contract_qa": 154}


def _rule(key: str) -> str:
    """The documented split rule, written out independently of the package."""
    digest = hashlib.sha256(f"{HALF_SALT}\0{key}".encode()).digest()
    return ("tune", "test")[int.from_bytes(digest[:8], "big") % 2]


def test_new_sets_are_registered_with_their_modes():
    modes = dev_set_modes(ROWS)
    assert modes["drcd_corpus"] == ("corpus", ("--corpus",))
    assert all(modes[n] == ("document", ()) for n in ROWS if n.startswith("leval_"))
    assert [n for n, _, _ in ALL_DEV_SETS][:6] == [n for n, _, _ in DEV_SETS]  # the six keep their order
    assert {n for n, _, _ in ADDED_DEV_SETS} == set(ROWS)
    with pytest.raises(ValueError, match="unknown dataset.*nope.*drcd_corpus"):
        dev_set_modes(["nope"])


@pytest.mark.parametrize("name", sorted(ROWS))
def test_real_file_has_disjoint_halves_of_the_right_sizes(name):
    path = require_shared("data", "eval", f"{name}.jsonl")
    whole = load_examples(path)
    tune, test = load_examples(path, half="tune"), load_examples(path, half="test")
    assert len(whole) == ROWS[name]
    assert {e.qid for e in tune}.isdisjoint({e.qid for e in test})
    assert len(tune) + len(test) == len(whole) and tune and test
    ids = [json.loads(line)["_id"] for line in path.open(encoding="utf-8") if line.strip()]
    assert len(set(ids)) == len(ids)  # every row has its own _id: the half is the coin of its _id
    assert len(tune) == sum(_rule(i) == "tune" for i in ids)
    # a fair coin per row: each half within 4 standard deviations of n/2
    assert abs(len(tune) - len(whole) / 2) <= 4 * (len(whole) ** 0.5) / 2


def test_peers_accept_the_new_sets(tmp_path, capsys):
    # known names get past the check and fail on the missing file (exit 3), not as unknown (exit 2)
    code = peers_main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "o"),
                       "--datasets", "drcd_corpus,leval_financial_qa", "--half", "tune"])
    assert code == 3
    assert "no such file" in capsys.readouterr().err
