"""Tests of companion.plotting."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from companion.plotting import heatmap, use_book_style  # noqa: E402


def test_heatmap_labels_everything_and_centres_the_colour_scale():
    use_book_style()
    ax = heatmap(np.array([[0.5, -2.0], [1.0, 0.0]]), title="T", xlabel="x (u)", ylabel="y (u)", colorbar_label="v")
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("T", "x (u)", "y (u)")
    assert ax.images[0].get_clim() == (-2.0, 2.0)
    plt.close(ax.figure)


def test_heatmap_refuses_non_2d():
    with pytest.raises(ValueError, match="2-D array"):
        heatmap(np.zeros(3), title="", xlabel="", ylabel="", colorbar_label="")


def test_cover_figure_is_what_the_code_draws():
    """README.md and the landing page show book/images/hero.png; `make figures` redraws it."""
    import io
    from pathlib import Path

    from companion.plotting import hero_figure

    buffer = io.BytesIO()
    fig = hero_figure()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    buffer.seek(0)
    drawn = plt.imread(buffer)
    stored = plt.imread(Path(__file__).resolve().parents[1] / "book" / "images" / "hero.png")
    assert drawn.shape == stored.shape, "the cover figure changed size: run `make figures`"
    assert np.abs(drawn - stored).mean() < 1e-3, "the cover figure is out of date: run `make figures`"
