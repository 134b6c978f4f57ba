"""Report figures: PNGs from plain data, Figure 1 only with two or more models, large libraries capped."""

from __future__ import annotations

import io

import matplotlib
from matplotlib.image import imread

from skillaudit.report import figures

PNG = b"\x89PNG\r\n\x1a\n"


def _group(model: str, benchmark: str = "*", lift: float = 0.08, rae: float = -0.05, sign: bool = True) -> dict:
    return {
        "model": model, "benchmark": benchmark, "n_pairs": 200, "n_cond": 120, "n_skip": 80,
        "oae": -0.02, "rae": rae, "delta_skip": 0.01, "agg_lift": lift, "selection_gap": 0.1,
        "oae_ci": [-0.05, 0.01], "rae_ci": [rae - 0.04, rae + 0.03], "delta_skip_ci": [-0.03, 0.05],
        "agg_lift_ci": [lift - 0.05, lift + 0.05], "sign_disagreement": sign, "reportable": True,
        "funnel": {"pairs": 200, "invoked": 130, "retrieved": 120, "adhered": None, "adherence_known": 0,
                   "effective": 14},
    }


def _skills(n: int) -> dict:
    rows = [{"skill_id": f"s{i:03d}", "n_retrieved": 10 + i % 7, "b": i % 5, "c": (i * 3) % 7,
             "net": i % 5 - (i * 3) % 7, "share": float(i % 5 - (i * 3) % 7) / 2} for i in range(n)]
    return {"skills": rows}


def _size(png: bytes) -> tuple[int, int]:
    img = imread(io.BytesIO(png), format="png")
    return img.shape[1], img.shape[0]


def test_every_figure_is_a_png():
    """Net bars, decomposition, funnel and the embedding map each draw a PNG from plain data."""
    metrics = {"groups": [_group("m1", "x"), _group("m1")]}
    clusters = {
        "map": [{"skill_id": f"s{i:03d}", "x": float(i % 4), "y": float(i // 4)} for i in range(12)],
        "clusters": [{"id": 0, "skills": ["s000", "s001", "s004"], "label": "sets, loops", "harmful": True},
                     {"id": 1, "skills": ["s005", "s006"], "label": "two", "harmful": True}],
    }
    outs = [
        figures.skill_net_bars(_skills(12), {"s000": "prune"}),
        figures.decomposition(metrics),
        figures.funnel(metrics),
        figures.embedding_map(clusters, _skills(12)),
    ]
    for png in outs:
        assert png is not None and png.startswith(PNG)
        w, h = _size(png)
        assert w > 300 and h > 150


def test_figure1_needs_two_models_in_render_all():
    """render_all draws the paper's Figure 1 only when the runs hold two or more models."""
    doc = {"skills": _skills(5), "metrics": {"groups": [_group("m1")]}, "recommendations": None, "clusters": None}
    assert "figure1.png" not in figures.render_all(doc)
    doc["metrics"]["groups"].append(_group("m2", lift=-0.03, rae=0.04, sign=True))
    doc["metrics"]["groups"].append(_group("m3", lift=0.02, rae=0.03, sign=False))
    out = figures.render_all(doc)
    assert out["figure1.png"].startswith(PNG)
    assert "embedding_map.png" not in out  # no library, no map


def test_figure1_handles_missing_cis_and_values():
    """Models without a lift or RAE are left out; missing CIs draw plain points."""
    g = _group("m1")
    g["agg_lift_ci"] = None
    g["rae_ci"] = None
    missing = _group("m2")
    missing["agg_lift"] = None
    assert figures.figure1([g, missing]).startswith(PNG)
    assert figures.figure1([missing]) is None


def test_net_bars_cap_large_libraries():
    """With hundreds of skills the bar chart keeps the most harmful and most helpful, at a readable height."""
    png = figures.skill_net_bars(_skills(400))
    _, h = _size(png)
    assert h < 1400
    assert figures.skill_net_bars({"skills": [{"skill_id": "a", "n_retrieved": 0, "b": 0, "c": 0, "net": 0}]}) is None


def test_figures_leave_pyplot_alone():
    """Drawing uses its own Agg canvases: the process-wide backend and pyplot figures are untouched."""
    backend = matplotlib.get_backend()
    figures.decomposition({"groups": [_group("m1")]})
    assert matplotlib.get_backend() == backend
    import sys

    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        assert plt.get_fignums() == []
