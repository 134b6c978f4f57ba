"""Arm integrity, before any statistic: is each arm what it claims?

A run without skills that activated, read or ran a skill file is a **leak** (its record's
`retrievals` name skills: the importers write what a disabled run's log shows, as for enabled
ones); a run with skills that was given none (`"offered": []`, written when the job injected
nothing: empty `agent.skills`, nothing in `lock.json`) is a **broken arm**. An importer can say more in
a record's `meta.arm_issue`: a run without skills whose log shows skills present (a listing of a
skills folder, a failed load: a broken arm though it used none), a run without skills whose log
could not be read while its partner's was (no leak check: failing closed), a run whose sources
disagree on its side. Each makes the pair compare something other than with vs without skills
(or leaves it unverified). The audit's headline names them and
`skillaudit check` fails on them unless `--allow-leaks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillaudit.util.term import named

#: issues named one by one; more are counted
MAX_NAMED = 10


@dataclass(frozen=True)
class ArmIntegrity:
    leaks: tuple[tuple[tuple[str, str, str, int], tuple[str, ...], str], ...] = ()
    broken: tuple[tuple[tuple[str, str, str, int], str], ...] = ()
    # (kind, key, what the importer saw, trial): kinds "present", "unchecked", "conflict"
    other: tuple[tuple[str, tuple[str, str, str, int], str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.leaks and not self.broken and not self.other

    def messages(self) -> list[str]:
        """One line per issue: what it is, where (trial or file:line) and which skills."""
        out = [f"leak: {key[0]} {key[2]} (epoch {key[3]}), trial {where}: the run without skills used "
               f"{', '.join(skills)}" for key, skills, where in self.leaks]
        out += [f"broken arm: {key[0]} {key[2]} (epoch {key[3]}), trial {where}: the run with skills was "
                "given none" for key, where in self.broken]
        out += [f"{_KIND_LINE[kind]}: {key[0]} {key[2]} (epoch {key[3]}), trial {where}: {detail}"
                for kind, key, detail, where in self.other]
        return out

    def summary(self) -> str | None:
        """One sentence for the headline, or None when every arm is what it claims."""
        if self.ok:
            return None
        parts = []
        if self.leaks:
            names = named([f"{w} ({', '.join(s)})" for _, s, w in self.leaks], MAX_NAMED)
            parts.append(f"{len(self.leaks)} run(s) without skills used skills (leak): {names}")
        if self.broken:
            names = named([w for _, w in self.broken], MAX_NAMED)
            parts.append(f"{len(self.broken)} run(s) with skills were given none (broken arm): {names}")
        for kind in _KIND_LINE:
            got = [w for k, _, _, w in self.other if k == kind]
            if got:
                parts.append(f"{len(got)} {_KIND_SUMMARY[kind]}: {named(got, MAX_NAMED)}")
        return "arm integrity: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary(), "messages": self.messages(),
                "leaks": [{"model": k[0], "benchmark": k[1], "task_id": k[2], "epoch": k[3], "trial": w,
                           "skills": list(s)} for k, s, w in self.leaks],
                "broken": [{"model": k[0], "benchmark": k[1], "task_id": k[2], "epoch": k[3], "trial": w}
                           for k, w in self.broken],
                "other": [{"kind": kind, "model": k[0], "benchmark": k[1], "task_id": k[2], "epoch": k[3],
                           "trial": w, "detail": d} for kind, k, d, w in self.other]}


def arm_integrity(inputs: Any) -> ArmIntegrity:
    """The leaks and broken arms the run logs show (`Inputs.arm_issues`)."""
    issues = getattr(inputs, "arm_issues", ()) or ()
    return ArmIntegrity(
        leaks=tuple((key, skills, where) for kind, key, skills, where in issues if kind == "leak"),
        broken=tuple((key, where) for kind, key, _, where in issues if kind == "broken"),
        other=tuple((kind, key, (detail or ("",))[0], where) for kind, key, detail, where in issues
                    if kind in _KIND_LINE),
    )


#: the importers' `meta.arm_issue` kinds: the message's head, and the headline's words
_KIND_LINE = {"present": "broken arm (skills present)", "unchecked": "leak check not possible",
              "conflict": "side conflict"}
_KIND_SUMMARY = {"present": "run(s) without skills had skills present (broken arm)",
                 "unchecked": "run(s) without skills could not be checked for leaks (no readable log)",
                 "conflict": "run(s) whose sources disagree on the side"}
