"""BM25 skill search (skillaudit.agents.retrieve)."""

from __future__ import annotations

import pytest
from _harness_fakes import write_library

from skillaudit.agents.retrieve import SkillIndex, render_result, tokenize
from skillaudit.library import load_library


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return SkillIndex(load_library(write_library(tmp_path_factory.mktemp("lib"))))


def test_top_hit_is_the_relevant_skill_and_at_most_three(index):
    """A query about shared list elements ranks set-intersection first; at most 3 skills come back."""
    ret = index.search("shared elements of two lists")
    assert ret.error is None
    assert ret.hits[0].id == "set-intersection"
    assert 1 <= len(ret.hits) <= 3
    assert [h.rank for h in ret.hits] == list(range(1, len(ret.hits) + 1))
    scores = [h.score for h in ret.hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_record_shape_matches_the_run_log_contract(index):
    """A call is logged as {query, skills: [{id, score, rank, hash}], error} in rank order; hash is the skill's content hash."""
    rec = index.search("percent discount").to_record()
    assert rec["query"] == "percent discount" and rec["error"] is None
    assert rec["skills"][0]["id"] == "percent-off"
    assert set(rec["skills"][0]) == {"id", "score", "rank", "hash"}
    assert rec["skills"][0]["hash"] == index.get("percent-off").content_hash[:16]


@pytest.mark.parametrize("query", [None, "", "   ", 42, ["list"], "x" * 501])
def test_invalid_query_returns_nothing_with_an_error(index, query):
    """Non-string, empty or overlong queries return no skills and say why."""
    ret = index.search(query)
    assert ret.hits == [] and ret.error and ret.error.startswith("invalid arguments")


def test_types_filter_and_invalid_types(index):
    """`types` keeps only skills of those domains; a non-list `types` is invalid and returns nothing."""
    math_only = index.search("elements percent prime rate", types=["math"])
    assert math_only.hits and {h.id for h in math_only.hits} <= {"percent-off", "unit-rate"}
    bad = index.search("prime", types=[1, 2])
    assert bad.hits == [] and "types" in bad.error
    assert index.types == ("coding", "math")


def test_query_of_unknown_words_returns_nothing_without_error(index):
    """A valid query matching no skill returns an empty list and no error."""
    ret = index.search("zebra quantum")
    assert ret.hits == [] and ret.error is None


def test_excluded_skills_are_never_returned(tmp_path):
    """--exclude-skills removes skills from the index; unknown ids are reported."""
    lib = load_library(write_library(tmp_path / "lib"))
    idx = SkillIndex(lib, {"set-intersection", "no-such-skill"})
    assert "set-intersection" not in idx.ids
    assert all(h.id != "set-intersection" for h in idx.search("shared elements of two lists").hits)
    assert idx.unknown_excluded == ("no-such-skill",)


def test_rendered_result_gives_skills_in_full_once(index):
    """Skills come back in full the first time and as a reference when returned again."""
    shown: set[str] = set()
    first = render_result(index, index.search("prime number"), shown)
    again = render_result(index, index.search("prime number"), shown)
    assert "## Skill: prime-test" in first and "trial division" in first
    assert "(already returned above)" in again and "trial division" not in again
    assert render_result(index, index.search(""), set()).startswith("No skills returned")


def test_tokenize_splits_snake_case_and_drops_stop_words():
    """Tokens are lower-case words; snake_case splits; stop words go."""
    assert tokenize("Find the count_of Elements in a list") == ["find", "count", "elements", "list"]
