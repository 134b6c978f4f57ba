"""`PairedRuns`: the paired runs as arrays (one row per pair, a sparse pair x skill matrix of the
retrieved skills) and the selections of them (`subset`, `select`).

It holds no reading code: `skillaudit.runs.load_runs` builds it (reading in `runs.reader`, pairing
in `runs.pairing`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from skillaudit.stats._csr import Csr


@dataclass(frozen=True)
class PairedRuns:
    """Paired outcomes, one row per (model, benchmark, task_id, epoch) seen in both conditions."""

    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    tasks: tuple[str, ...]
    skills: tuple[str, ...]
    model: np.ndarray  # int32 index into models
    benchmark: np.ndarray  # int32 index into benchmarks
    task: np.ndarray  # int32 index into tasks
    epoch: np.ndarray  # int32, >= 1
    y_pos: np.ndarray  # bool: enabled run correct
    y_neg: np.ndarray  # bool: disabled run correct
    invoked: np.ndarray  # bool: enabled run called the retrieval tool
    adhered: np.ndarray  # int8: 1/0, or -1 when no answer was logged
    # pairs x skills: the 1-based rank of each retrieved skill, columns sorted within each row
    retrieval: Csr
    retrieval_scores: np.ndarray  # float32 per entry of `retrieval`: its score (nan when not logged)
    n_unpaired: int = 0
    unpaired_examples: tuple[str, ...] = ()
    n_error_pairs: int = 0
    sources: tuple[str, ...] = field(default=())
    n_arm_records: int = 0  # counterfactual arm records set aside (read them with skillaudit.analysis.counterfactual)
    # False: no line the loader read holds the bytes "hash", so no record logs a skill's content
    # hash and the provenance pass (skillaudit.runs.provenance.seen_hashes) has nothing to find
    skill_hashes: bool = True
    # bool per pair: False where the enabled record says which skills were offered but not which
    # were used (`"use_logged": false`); None when every pair logged its use (the usual case)
    use_logged: np.ndarray | None = None
    # int8 per pair: the enabled record's judged `preference` against the disabled answer (1 win,
    # 0 tie, -1 loss, -2 not judged: `runs.records.PREFERENCES`); None when no pair was judged
    preference: np.ndarray | None = None
    # int8 per pair: the judge's A/A check logged on the enabled record (`judge_aa`: 0 tie, 1 the
    # judge gave a verdict between two copies of one answer, -1 not checked); None when none was
    judge_aa: np.ndarray | None = None

    @property
    def use_unlogged(self) -> np.ndarray:
        """Bool per pair: its enabled run's skill use was not recorded (offered only)."""
        if self.use_logged is None:
            return np.zeros(self.n_pairs, dtype=bool)
        return ~self.use_logged

    @property
    def n_pairs(self) -> int:
        return int(self.y_pos.shape[0])

    @cached_property
    def ranks(self) -> Any:
        """scipy.sparse.csr_matrix, pairs x skills: 1-based rank of each retrieved skill (0 = not retrieved)."""
        return self.retrieval.to_scipy()

    @cached_property
    def scores(self) -> Any:
        """scipy.sparse.csr_matrix with the pattern of `ranks`: the retrieval scores (nan when not logged)."""
        r = self.retrieval
        return Csr(self.retrieval_scores, r.indices.copy(), r.indptr.copy(), r.shape).to_scipy()

    @property
    def n_skills_retrieved(self) -> np.ndarray:
        """Size of each pair's deduplicated retrieved set."""
        return np.diff(self.retrieval.indptr)

    @property
    def retrieved(self) -> np.ndarray:
        """Bool per pair: in S_call (the enabled run got at least one skill back)."""
        return self.n_skills_retrieved > 0

    @property
    def flip(self) -> np.ndarray:
        """y+ - y- per pair in {-1, 0, +1} (int8)."""
        return self.y_pos.astype(np.int8) - self.y_neg.astype(np.int8)

    def unit_ids(self) -> np.ndarray:
        """Bootstrap unit per pair (0..n_units-1): a task, with all its epochs, in its model and benchmark."""
        key = (self.model.astype(np.int64) * len(self.benchmarks) + self.benchmark) * len(self.tasks) + self.task
        return np.unique(key, return_inverse=True)[1].ravel()

    def subset(self, mask: np.ndarray) -> PairedRuns:
        """Only the pairs where `mask` is true (vocabularies are kept)."""
        idx = np.flatnonzero(mask)
        r = self.retrieval
        indptr, pos = r.row_entries(idx)
        hits = Csr(r.data[pos], r.indices[pos], indptr, (idx.size, r.shape[1]))
        return PairedRuns(
            models=self.models, benchmarks=self.benchmarks, tasks=self.tasks, skills=self.skills,
            model=self.model[idx], benchmark=self.benchmark[idx], task=self.task[idx],
            epoch=self.epoch[idx], y_pos=self.y_pos[idx], y_neg=self.y_neg[idx],
            invoked=self.invoked[idx], adhered=self.adhered[idx],
            retrieval=hits, retrieval_scores=self.retrieval_scores[pos],
            n_unpaired=self.n_unpaired, unpaired_examples=self.unpaired_examples,
            n_error_pairs=self.n_error_pairs, sources=self.sources, n_arm_records=self.n_arm_records,
            skill_hashes=self.skill_hashes,
            use_logged=None if self.use_logged is None else self.use_logged[idx],
            preference=None if self.preference is None else self.preference[idx],
            judge_aa=None if self.judge_aa is None else self.judge_aa[idx],
        )

    def select(self, model: str | None = None, benchmark: str | None = None) -> PairedRuns:
        """Pairs of one model and/or benchmark (None = all)."""
        if model is None and benchmark is None:
            return self  # frozen: nothing to copy
        mask = np.ones(self.n_pairs, dtype=bool)
        if model is not None:
            mask &= self.model == (self.models.index(model) if model in self.models else -1)
        if benchmark is not None:
            mask &= self.benchmark == (
                self.benchmarks.index(benchmark) if benchmark in self.benchmarks else -1
            )
        return self.subset(mask)
