"""The method registry and the attention seam: a method declared in this file is trained, evaluated,
checked, plotted and tabulated with no edit elsewhere; the seam computes what it says."""

import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from eie import comparison, experiments, extrapolation, methods, scaling, study  # noqa: E402
from eie.attention import Attention, AttentionContext  # noqa: E402
from eie.plotting import extrapolation_figure  # noqa: E402
from eie.run_checks import check_extrapolation  # noqa: E402


class DistanceBias(Attention):
    """A per-head bias -m_h * |x_i - x_j| on the encoder logits (the shape of PENS's distance bias)."""

    def bias(self, ctx: AttentionContext, n_queries: int):
        if ctx.site != "encoder" or ctx.positions is None:
            return None
        slopes = torch.tensor([2.0 ** -h for h in range(8)], dtype=ctx.positions.dtype)
        distance = torch.cdist(ctx.positions, ctx.positions)  # (B, n, n)
        return -slopes.view(1, -1, 1, 1) * distance[:, None]


def _stretched_log(d, N=None, **_):
    """A test-time rule equal to 1/sqrt(d) at N: 1/sqrt(d) * (1 + log2(n / N) / 10)."""
    return scaling.ScalingRule("stretched", d, lambda n: (1 + scaling._log(n / N) / math.log(2) / 10) / math.sqrt(d))


@pytest.fixture
def new_methods():
    added = [methods.register(Method) for Method in (
        methods.Method("test_bias", "test bias", "test bias", "#2ca02c",
                       lambda d, **_: scaling.inv_sqrt_d(d), attention=DistanceBias),
        methods.Method("stretched", "stretched log", "stretched log", "#17becf", _stretched_log,
                       applied_to="test_bias", linestyle="-."),
    )]
    yield added
    for method in reversed(added):
        methods.unregister(method.key)


def test_a_method_registered_here_is_trained_evaluated_checked_plotted_and_tabulated(tmp_path, monkeypatch, new_methods):
    monkeypatch.setattr(study, "results_dir", lambda run="default": tmp_path / run)
    models, log = study.train_models(["test_bias"], [0], run="t", device="cpu", progress=False, problem="tsp",
                                     n_train=8, epochs=1, steps_per_epoch=2, batch_size=8, baseline_eval_size=8)
    assert isinstance(models[("test_bias", 0)].attention, DistanceBias) and len(log) == 1
    bound = extrapolation.bind_methods(["test_bias", "stretched"], 16, 8)
    results, _, _ = extrapolation.evaluate(models, bound, 8, 16, test_size=4, reference_size=2, device="cpu", progress=False)
    assert set(results.method) == {"test_bias", "stretched", "reference"}
    assert "stretched reproduce the test bias model exactly at n = N = 8" in check_extrapolation(results, 8)
    table = comparison.table_by_method(results).rename(index=methods.label)
    assert list(table.index) == ["test bias", "stretched log"]
    figure = extrapolation_figure(results, "tour length", "LKH")
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert matplotlib.colors.to_hex(lines["stretched log"].get_color()) == "#17becf"
    assert lines["stretched log"].get_linestyle() == "-."
    config = experiments.configure("03_train_tsp", {"rules": ["test_bias"], "training_free": ["stretched"]})
    assert (config.rules, config.training_free) == (["test_bias"], ["stretched"])  # the experiments take the new keys


def test_the_bias_reaches_the_encoder_and_the_probes(new_methods):
    from eie import probes
    from eie.model import AttentionModel
    from eie.problems import TSP

    torch.manual_seed(0)
    plain = AttentionModel(TSP(), Attention(scaling.inv_sqrt_d(16))).eval()
    instance = TSP().generate(2, 10, torch.Generator().manual_seed(1))
    own = probes.probe_encoder(plain, instance)
    biased = probes.probe_encoder(plain, instance, methods.get("test_bias").bind(16))
    distance = torch.cdist(instance["coords"], instance["coords"])
    q, k, _ = plain.encoder[0].attention.heads_of(own.inputs[0])
    expected = torch.softmax(0.25 * q @ k.transpose(-1, -2) - torch.tensor([2.0 ** -h for h in range(8)]).view(1, -1, 1, 1)
                             * distance[:, None], dim=-1)
    assert torch.allclose(biased.entropies[0], -(expected * expected.log()).sum(-1), atol=1e-5)
    assert not torch.allclose(biased.entropies[0], own.entropies[0], atol=1e-3)


@pytest.mark.parametrize("attention", ["plain", "biased"])
def test_the_seam_is_softmax_of_its_logits(attention, new_methods):
    """`Attention.__call__` (the fused kernel) equals softmax of `Attention.logits` (what probes read)."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 8, 7, 16, generator=generator) for _ in range(3))
    positions = torch.rand(3, 7, 2, generator=generator)
    ctx = AttentionContext("encoder", 1, torch.full((3,), 7.0), positions)
    allowed = torch.rand(3, 1, 7, 7, generator=generator) > 0.3
    allowed[..., 0] = True
    seam = (Attention if attention == "plain" else DistanceBias)(scaling.ln_d(16))
    logits = seam.logits(q, k, ctx).masked_fill(~allowed, float("-inf"))
    expected = torch.softmax(logits, dim=-1) @ v
    assert torch.allclose(seam(q, k, v, ctx, allowed), expected, atol=1e-5)
    direct = F.scaled_dot_product_attention(q * math.log(7) / 16, k, v, attn_mask=allowed, scale=1.0)
    assert torch.allclose(seam(q, k, v, ctx, allowed), direct, atol=1e-5) == (attention == "plain")


def test_the_scale_applies_at_its_sites_only():
    seam = Attention(scaling.ln_d(16), sites=("glimpse",))
    n = torch.tensor([50.0, 200.0])
    assert torch.allclose(seam.scale(AttentionContext("encoder", 0, n)), torch.full((2,), 0.25))
    assert torch.allclose(seam.scale(AttentionContext("glimpse", 0, n)), torch.log(n) / 16)
    with pytest.raises(ValueError, match="unknown attention sites"):
        Attention(scaling.ln_d(16), sites=("pointer",))


def test_registry_refuses_inconsistent_methods():
    with pytest.raises(ValueError, match="not registered"):
        methods.register(methods.Method("orphan", "o", "o", "#000000", _stretched_log, applied_to="nope"))
    with pytest.raises(ValueError, match="must be applied to a trained method"):
        methods.register(methods.Method("chain", "c", "c", "#000000", _stretched_log, applied_to="eie"))
    assert "orphan" not in methods.keys() and "chain" not in methods.keys()


def test_relative_panel_pairs_each_method_with_the_base_model_of_its_seed():
    import pandas as pd

    from eie.plotting import relative_to

    rows = [{"problem": "tsp", "setting": "", "method": m, "seed": seed, "n": 20, "objective": v, "gap_pct": 0.0}
            for m, seed, v in [("inv_sqrt_d", 0, 10.0), ("inv_sqrt_d", 1, 20.0), ("eie", 0, 9.0), ("eie", 1, 19.0)]]
    rows.append({"problem": "tsp", "setting": "", "method": "reference", "seed": -1, "n": 20, "objective": 5.0,
                 "gap_pct": 0.0})
    relative = relative_to(pd.DataFrame(rows)).set_index(["method", "seed"]).relative
    assert relative[("eie", 0)] == pytest.approx(-10.0) and relative[("eie", 1)] == pytest.approx(-5.0)
    assert relative[("inv_sqrt_d", 1)] == 0.0
    figure = extrapolation_figure(pd.DataFrame(rows), "tour length", "LKH")
    assert len(figure.axes) == 3 and "1/sqrt(d)" in figure.axes[2].get_ylabel()


def test_training_figure_tells_seeds_apart_and_floors_p_values():
    import pandas as pd

    from eie.plotting import P_FLOOR, training_figure

    rows = [dict(setting="", rule="inv_sqrt_d", seed=seed, epoch=e, eval_cost=10.0 - e, p_value=p)
            for seed in (0, 1) for e, p in enumerate([1e-300, 0.3, 1.0])]
    fig = training_figure(pd.DataFrame(rows), "cost")
    objective_axis, p_axis = fig.axes
    styles = [line.get_linestyle() for line in objective_axis.get_lines()]
    assert len(styles) == 2 and styles[0] != styles[1]  # one rule, two seeds: two line styles
    assert {line.get_color() for line in objective_axis.get_lines()} == {methods.style("inv_sqrt_d")["color"]}
    p_lines = [line for line in p_axis.get_lines() if len(line.get_xdata()) == 3]
    assert len(p_lines) == 2 and all(line.get_ydata()[0] == P_FLOOR for line in p_lines)
    low, high = p_axis.get_ylim()
    assert low < P_FLOOR and 1.0 < high < 10


def test_training_figure_marks_the_epochs_where_the_learning_rate_was_lowered():
    import pandas as pd

    from eie.plotting import training_figure

    lrs = [1e-4, 1e-4, 2.5e-5, 2.5e-5, 6.25e-6]
    rows = [dict(setting="", rule="inv_sqrt_d", seed=seed, epoch=e + 1, eval_cost=10.0 - e, p_value=0.5, lr=lr)
            for seed in (0, 1) for e, lr in enumerate(lrs)]
    fig = training_figure(pd.DataFrame(rows), "cost", mark_lr_drops=True)
    markers = [line for line in fig.axes[0].get_lines() if line.get_marker() == "v" and len(line.get_xdata())]
    assert len(markers) == 2  # one per seed
    assert all(list(line.get_xdata()) == [3, 5] and list(line.get_ydata()) == [8.0, 6.0] for line in markers)
    assert [text.get_text() for text in fig.axes[0].get_legend().get_texts()].count("learning rate lowered") == 1
    for unmarked in (training_figure(pd.DataFrame(rows).assign(lr=1e-4), "cost", mark_lr_drops=True),
                     training_figure(pd.DataFrame(rows), "cost")):  # nothing lowered; not asked
        assert not [line for line in unmarked.axes[0].get_lines() if line.get_marker() == "v"]


def test_training_figure_draws_the_sampled_objective_and_the_reference_at_n():
    import numpy as np
    import pandas as pd

    from eie.plotting import training_figure

    rows = [dict(setting="120x100", rule="inv_sqrt_d", seed=0, epoch=e + 1, eval_cost=-50.0 - e, train_cost=-30.0 - e,
                 p_value=0.5) for e in range(4)]
    references = {"120x100": {10: np.array([60.0, 62.0]), 20: np.array([70.0])}}
    fig = training_figure(pd.DataFrame(rows), "load rate (%)", maximise=True, sampled=True, references=references,
                          at_n=10, reference_name="best heuristic")
    lines = fig.axes[0].get_lines()
    drawn = {tuple(line.get_ydata()) for line in lines if len(line.get_xdata()) == 4}
    assert drawn == {(50.0, 51.0, 52.0, 53.0), (30.0, 31.0, 32.0, 33.0)}  # held-out greedy and, faint, sampled
    assert [list(line.get_ydata()) for line in lines if line.get_linestyle() == "--"] == [[61.0, 61.0]]
    assert "best heuristic, n = 10" in [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    plain = training_figure(pd.DataFrame(rows), "load rate (%)", maximise=True)
    assert len([line for line in plain.axes[0].get_lines() if len(line.get_xdata())]) == 1  # neither unless asked


def test_tsplib_figure_draws_each_methods_gap_and_its_difference_to_the_base_model_instance_by_instance():
    import pandas as pd

    from eie.plotting import tsplib_figure

    rows = [{"name": name, "n": n, "band": "n <= 200", "method": method, "seed": seed, "gap_pct": gap}
            for name, n, method, seed, gap in [("b", 120, "inv_sqrt_d", 0, 10.0), ("b", 120, "inv_sqrt_d", 1, 14.0),
                                               ("a", 60, "inv_sqrt_d", 0, 4.0), ("a", 60, "inv_sqrt_d", 1, 6.0),
                                               ("b", 120, "eie", 0, 15.0), ("b", 120, "eie", 1, 17.0),
                                               ("a", 60, "eie", 0, 5.0), ("a", 60, "eie", 1, 5.0)]]
    fig = tsplib_figure(pd.DataFrame(rows), N=100)
    gap_axis, difference_axis = fig.axes
    eie_gap, eie_difference = (next(line for line in ax.get_lines() if line.get_label() == methods.label("eie"))
                               for ax in (gap_axis, difference_axis))
    assert list(eie_gap.get_xdata()) == [60, 120]  # in order of size, seeds averaged
    assert list(eie_gap.get_ydata()) == pytest.approx([5.0, 16.0])
    assert list(eie_difference.get_ydata()) == pytest.approx([0.0, 4.0])  # minus 1/sqrt(d)'s 5 and 12 on the same instance
    assert len(tsplib_figure(pd.DataFrame(rows[4:]), N=100).axes) == 1  # no base model: the gap panel alone
