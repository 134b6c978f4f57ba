"""The runner of counterfactual arms for `skillaudit run --arms` (DESIGN §3.1b): replay a logged
enabled run's tool call(s) and change only what the tool returns.

This is the producing side (the `ArmTool`, arm seeds, mask draws, replayed turns, reading the base
log); the analysis of the records it writes (control-arm effects, causal effects of masks) is
`skillaudit.analysis.counterfactual`. Named apart so a newcomer can tell "how are the re-runs run?" from
"what do they show?".

An enabled arm keeps the enabled run's prompt, seed and tool call(s) (replayed from the log, not
re-sampled: the model is asked only for the turns after the tool result) and returns:

- `random`: as many skills as the call retrieved, drawn at random from the rest of the library;
- `filler`: text of the same length as the real result that holds no procedure;
- `empty`: the tool's well-formed "no matching skills" result;
- `corrupted`: the retrieved skills with their steps and code lines shuffled;
- `mask`: each retrieved skill kept with probability 1/2 (`meta.kept`, `meta.withheld`,
  `meta.mask_seed`); `mask:M` draws M masks per task;
- `pruned`: the result of the same query against the library without `--prune` (`meta.excluded`).

`replicate` is a second disabled run with another seed: the A/A noise floor.

Replay needs the enabled record's turns up to each tool result. Records written by this harness
carry them in `meta.replay` (`[{"content": <the model's turn, verbatim>, "calls": [{"name",
"arguments"}]}]`); for older records the turns are rebuilt from `retrievals` (exact in `chatml`
mode with `--tool-choice required`, where the model writes only the query).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from skillaudit.agents.retrieve import Hit, Retrieval, SkillIndex, render_result, render_skill
from skillaudit.errors import InputError

ENABLED_ARMS = ("random", "filler", "empty", "corrupted", "mask", "pruned")
ARM_NAMES = (*ENABLED_ARMS, "replicate")
#: seeds of the arms' own draws (random skills, masks, the replicate's sampling) differ from the pair's
FILLER_TEXT = (
    "## Note\nThis entry is a placeholder kept for layout and says nothing about the task at hand. "
    "The library index lists entries by their date of addition; placeholders keep the numbering "
    "of the index stable when entries are moved, renamed or retired. "
)


@dataclass(frozen=True)
class ArmSpec:
    """One arm to run; `masks` is M for `mask:M` (1 otherwise)."""

    name: str
    masks: int = 1

    @property
    def enabled_side(self) -> bool:
        return self.name != "replicate"


def parse_arms(text: str) -> tuple[ArmSpec, ...]:
    """`random,filler,empty,corrupted,replicate,mask:4,pruned` -> specs (order kept, no repeats)."""
    out: list[ArmSpec] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, m = part.partition(":")
        if name not in ARM_NAMES:
            raise InputError(f"--arms: unknown arm {name!r} (choose from {', '.join(ARM_NAMES)}; mask:M)")
        masks = 1
        if m:
            if name != "mask" or not m.isdigit() or not 1 <= int(m) <= 1024:
                raise InputError(f"--arms: {part!r}: only mask takes a count, mask:M with 1 <= M <= 1024")
            masks = int(m)
        elif name == "mask":
            masks = 4
        if any(s.name == name for s in out):
            raise InputError(f"--arms: {name} given twice")
        out.append(ArmSpec(name, masks))
    if not out:
        raise InputError("--arms: give at least one arm")
    return tuple(out)


def arm_seed(seed: int, arm: str, index: int = 0) -> int:
    """The seed of an arm's own draw for one task (from the pair's sampling seed)."""
    return zlib.crc32(f"{seed}:{arm}:{index}".encode()) & 0x7FFFFFFF


# ---------------------------------------------------------------- the base log
@dataclass(frozen=True)
class BasePair:
    """The main enabled and disabled records of one (task, epoch) in the base log."""

    task_id: str
    epoch: int
    enabled: dict[str, Any]
    disabled: dict[str, Any]

    @property
    def retrieved(self) -> tuple[str, ...]:
        """Skills the enabled run got back (first occurrence order)."""
        return tuple(dict.fromkeys(h for call in self.enabled.get("retrievals") or []
                                   for h in hit_ids(call)))


def hit_ids(call: dict[str, Any]) -> list[str]:
    out = []
    for s in call.get("skills") or []:
        sid = s if isinstance(s, str) else s.get("id") if isinstance(s, dict) else None
        if isinstance(sid, str):
            out.append(sid)
    return out


def read_base(path: str | Path, model: str, benchmark: str) -> dict[tuple[str, int], BasePair]:
    """The complete main pairs of `model`/`benchmark` in a base log (error records and arms left out)."""
    path = Path(path)
    halves: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"--base {path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise InputError(f"{path}:{lineno}: not valid JSON") from None
            if not isinstance(rec, dict) or rec.get("arm") is not None or rec.get("error") is not None:
                continue
            if rec.get("model", "default") != model or rec.get("benchmark", "default") != benchmark:
                continue
            cond = rec.get("condition")
            if cond not in ("enabled", "disabled"):
                continue
            epoch = rec.get("epoch", 1)
            if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
                raise InputError(f"{path}:{lineno}: epoch must be an integer, not {epoch!r:.40}")
            key = (str(rec.get("task_id")), int(epoch or 1))
            halves.setdefault(key, {})[cond] = rec
    return {k: BasePair(k[0], k[1], v["enabled"], v["disabled"]) for k, v in halves.items()
            if "enabled" in v and "disabled" in v}


def base_models(path: str | Path) -> set[tuple[str, str]]:
    """(model, benchmark) pairs present in a base log (for a clear error when --model-label differs)."""
    seen: set[tuple[str, str]] = set()
    with Path(path).open("rb") as fh:
        for line in fh:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                seen.add((str(rec.get("model", "default")), str(rec.get("benchmark", "default"))))
    return seen


# ---------------------------------------------------------------- replay
def replay_turns(rec: dict[str, Any], chatml_forced: bool) -> list[dict[str, Any]]:
    """The enabled record's tool-call turns: logged ones (`meta.replay`), else rebuilt from `retrievals`."""
    meta = rec.get("meta") or {}
    logged = meta.get("replay")
    if isinstance(logged, list) and logged:
        return logged
    turns = []
    for call in rec.get("retrievals") or []:
        args: dict[str, Any] = {"query": call.get("query")}
        if call.get("types") is not None:
            args["types"] = call["types"]
        if chatml_forced and not turns:
            from skillaudit.agents.agent import FORCED_PREFILL

            content = FORCED_PREFILL + str(call.get("query")) + '"}}\n</tool_call>'
        else:
            content = "<tool_call>\n" + json.dumps({"name": "search_skills", "arguments": args}) + "\n</tool_call>"
        turns.append({"content": content, "calls": [{"name": "search_skills", "arguments": args}]})
    return turns


# ---------------------------------------------------------------- what the arm's tool returns
_ITEM = re.compile(r"^(\s*(?:\d+[.)]|[-*+])\s+)(.*)$")


def corrupt_body(body: str, rng: random.Random) -> str:
    """Steps shuffled within each list and code lines shuffled within each fence: same words, wrong order."""
    lines = body.split("\n")
    out = list(lines)
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("```"):
                j += 1
            block = lines[i + 1:j]
            rng.shuffle(block)
            out[i + 1:j] = block
            i = j + 1
            continue
        m = _ITEM.match(lines[i])
        if m:
            j = i
            while j < len(lines) and _ITEM.match(lines[j]):
                j += 1
            prefixes = [_ITEM.match(x).group(1) for x in lines[i:j]]  # type: ignore[union-attr]
            texts = [_ITEM.match(x).group(2) for x in lines[i:j]]  # type: ignore[union-attr]
            if len(texts) > 1:
                order = list(range(len(texts)))
                while len(set(texts)) > 1 and order == sorted(order):
                    rng.shuffle(order)
                texts = [texts[k] for k in order]
            out[i:j] = [p + t for p, t in zip(prefixes, texts, strict=True)]
            i = j
            continue
        i += 1
    return "\n".join(out)


def filler(n_chars: int) -> str:
    """Text of exactly `n_chars` characters that holds no procedure."""
    reps = FILLER_TEXT * (n_chars // len(FILLER_TEXT) + 1)
    return reps[:n_chars]


class ArmTool:
    """`search_skills` for one arm of one pair: answers the replayed calls in order.

    `base_calls` are the enabled record's logged calls; call i of the replay gets the arm's version
    of base call i (a call beyond the logged ones gets the real search, which cannot happen when
    every call is replayed).
    """

    def __init__(self, arm: str, index: SkillIndex, base_calls: list[dict[str, Any]], seed: int,
                 *, kept: set[str] | None = None, pruned_index: SkillIndex | None = None,
                 top_k: int = 3) -> None:
        self.arm = arm
        self.index = index
        self.base_calls = base_calls
        self.rng = random.Random(seed)
        self.kept = kept
        self.pruned_index = pruned_index
        self.top_k = top_k
        self.i = 0

    def _base_hits(self, call: dict[str, Any]) -> list[Hit]:
        hits = []
        for rank, sid in enumerate(hit_ids(call), 1):
            if self.index.get(sid) is None:
                raise InputError(f"skill {sid!r} of the base run is not in --skills: replay needs the "
                                 "library the base run used")
            score = next((float(s.get("score") or 0.0) for s in call.get("skills") or []
                          if isinstance(s, dict) and s.get("id") == sid), 0.0)
            hits.append(Hit(id=sid, score=score, rank=rank, hash=self.index.hash_of(sid)))
        return hits

    def __call__(self, query: Any, types: Any, shown: set[str]) -> tuple[Retrieval, str]:
        base = self.base_calls[self.i] if self.i < len(self.base_calls) else None
        self.i += 1
        if base is None or base.get("error"):
            ret = self.index.search(query, types, k=self.top_k)
            return ret, render_result(self.index, ret, shown)
        hits = self._base_hits(base)
        ret = Retrieval(query=query, types=types)
        if self.arm == "random":
            others = [s for s in self.index.ids if s not in {h.id for h in hits}]
            pick = self.rng.sample(others, min(len(hits), len(others)))
            ret.hits = [Hit(id=s, score=0.0, rank=r, hash=self.index.hash_of(s)) for r, s in enumerate(pick, 1)]
            return ret, render_result(self.index, ret, shown)
        if self.arm == "filler":
            real = Retrieval(query=query, types=types, hits=hits)
            text = render_result(self.index, real, set(shown))
            return ret, filler(len(text)) if hits else text
        if self.arm == "empty":
            return ret, render_result(self.index, ret, shown)
        if self.arm == "corrupted":
            ret.hits = hits
            parts = []
            for h in hits:
                skill = self.index.get(h.id)
                assert skill is not None
                if h.id in shown:
                    parts.append(f"## Skill: {h.id}\n(already returned above)\n")
                    continue
                shown.add(h.id)
                bent = dataclasses.replace(skill, body=corrupt_body(skill.body, self.rng))
                parts.append(render_skill(bent))
            return ret, "\n".join(parts) if parts else render_result(self.index, ret, shown)
        if self.arm == "mask":
            assert self.kept is not None
            ret.hits = [Hit(id=h.id, score=h.score, rank=r, hash=h.hash) for r, h in
                        enumerate((h for h in hits if h.id in self.kept), 1)]
            return ret, render_result(self.index, ret, shown)
        if self.arm == "pruned":
            assert self.pruned_index is not None
            ret = self.pruned_index.search(query, types, k=self.top_k)
            return ret, render_result(self.pruned_index, ret, shown)
        raise InputError(f"arm {self.arm!r} has no tool")  # pragma: no cover - parse_arms checks


def mask_draw(retrieved: tuple[str, ...], seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Keep each retrieved skill with probability 1/2: (kept, withheld), in retrieval order."""
    rng = random.Random(seed)
    keep = [rng.random() < 0.5 for _ in retrieved]
    return (tuple(s for s, k in zip(retrieved, keep, strict=True) if k),
            tuple(s for s, k in zip(retrieved, keep, strict=True) if not k))


def arm_units(pairs: dict[tuple[str, int], BasePair], specs: tuple[ArmSpec, ...],
              prune: frozenset[str] = frozenset()) -> Iterator[tuple[BasePair, str, int]]:
    """(pair, arm, mask index) to run: enabled arms on S_call pairs (`pruned`: only those whose
    retrieved set touches the prune set), `replicate` on every pair.

    Task-major order (every arm of one pair, then the next pair), so a run stopped early holds all
    its arms for the same tasks and the arms compare like with like.
    """
    for key in sorted(pairs):
        pair = pairs[key]
        got = pair.retrieved
        for spec in specs:
            if spec.name == "replicate":
                yield pair, "replicate", -1
            elif not got or (spec.name == "pruned" and not (set(got) & prune)):
                continue
            elif spec.name == "mask":
                for m in range(spec.masks):
                    yield pair, "mask", m
            else:
                yield pair, spec.name, -1
