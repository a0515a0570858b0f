
import numpy as np
import pytest
import torch

from eie import scaling
from eie.eie_net import EIEConfig, EIENet, eie_lambda, fit_eie, gauss_legendre_5, load_eie_net, requr, save_eie_net


def test_requr_shape():
    x = torch.tensor([-1.0, 0.25, 0.5, 2.0])
    assert torch.allclose(requr(x), torch.tensor([0.0, 0.0625, 0.25, 1.75]))


def test_gauss_legendre_is_exact_to_degree_nine():
    a, b = torch.tensor([0.0, -1.0]), torch.tensor([2.0, 3.0])
    for k in range(10):
        got = gauss_legendre_5(a.double(), b.double(), lambda x, k=k: x[..., 0] ** k)
        want = (b.double() ** (k + 1) - a.double() ** (k + 1)) / (k + 1)
        assert torch.allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("input_scale", ["gaussian", "log", "unit", "raw"])
@pytest.mark.parametrize("first_activation", ["requr", "relu"])
def test_derivative_is_positive_by_construction(input_scale, first_activation):
    torch.manual_seed(0)
    net = EIENet(EIEConfig(d=16, N=100, N_max=1600, input_scale=input_scale, first_activation=first_activation))
    with torch.no_grad():  # arbitrary parameters: f >= eps must hold whatever they are
        for p in net.parameters():
            p.normal_()
    x = net._to_input(torch.linspace(100, 1600, 300, dtype=torch.float64))[:, None]
    assert bool((net.derivative(x) >= net.config.eps).all())
    assert float(net(torch.tensor(100.0)).detach()) == pytest.approx(0.25)


def test_initial_lambda_increases():
    net = EIENet(EIEConfig(d=16, N=100, N_max=1600))
    lam = net(torch.linspace(100, 1600, 300, dtype=torch.float64)).detach()
    assert bool((lam[1:] > lam[:-1]).all())


def test_one_five_point_rule_can_break_monotonicity_for_a_rough_derivative():
    """Eq. 12 with one 5-point rule is monotone in n only while f is smooth on [N, n]: the nodes move
    with n. Documented in eie_net.py; the fitted nets are checked for monotonicity in notebook 02."""
    torch.manual_seed(0)
    net = EIENet(EIEConfig(d=16, N=100, N_max=1600, input_scale="log"))
    with torch.no_grad():
        for p in net.parameters():
            p.normal_()
    lam = net(torch.linspace(100, 1600, 300, dtype=torch.float64)).detach()
    assert not bool((lam[1:] > lam[:-1]).all())


def test_config_is_checked():
    with pytest.raises(ValueError, match="N_max must be larger"):
        EIEConfig(d=16, N=100, N_max=100)
    with pytest.raises(ValueError, match="head size d"):
        EIEConfig(d=0, N=100, N_max=1600)
    with pytest.raises(ValueError, match="input_scale"):
        EIEConfig(d=16, N=100, N_max=1600, input_scale="weird")
    with pytest.raises(ValueError, match="first_activation"):
        EIEConfig(d=16, N=100, N_max=1600, first_activation="tanh")


def test_save_load_and_refusals(tmp_path):
    net = EIENet(EIEConfig(d=16, N=100, N_max=1600))
    path = save_eie_net(net, tmp_path / "net.pt")
    loaded = load_eie_net(path, d=16)
    assert loaded.config == net.config
    assert np.allclose(eie_lambda(loaded, [150, 900]), eie_lambda(net, [150, 900]))
    with pytest.raises(ValueError, match="fitted for d=16, not d=32"):
        load_eie_net(path, d=32)
    with pytest.raises(FileNotFoundError, match="no fitted EIE net"):
        load_eie_net(tmp_path / "missing.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="not a loadable EIE net"):
        load_eie_net(corrupt)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(ValueError, match="not a loadable EIE net"):
        load_eie_net(other)


def test_eie_rule_clamps_below_training_length():
    net = EIENet(EIEConfig(d=16, N=100, N_max=1600))
    rule = scaling.eie(net)
    assert rule(50) == pytest.approx(0.25)
    assert torch.is_tensor(rule(torch.tensor([50.0, 400.0])))


@pytest.fixture(scope="module")
def small_fit():
    return fit_eie(16, 20, 160, epochs=150, batch_size=64, samples=16, seed=0, progress=False,
                   target_samples=8192)


def test_small_fit_reaches_the_exact_scale(small_fit):
    net, history = small_fit
    table = scaling.solve_exact(16, 20, 160, grid_points=5, samples=1024, target_samples=8192, seed=0)
    exact = scaling.exact(table)
    for n in (40, 80, 160):
        assert abs(float(eie_lambda(net, n)) - exact(n)) < 0.03
    lam = eie_lambda(net, np.linspace(20, 160, 200))
    assert np.all(np.diff(lam) > 0)
    assert np.mean(history.loss[-20:]) < np.mean(history.loss[:20])


def test_fit_is_deterministic(small_fit):
    net, _ = small_fit
    again, _ = fit_eie(16, 20, 160, epochs=150, batch_size=64, samples=16, seed=0, progress=False,
                       target_samples=8192)
    assert np.allclose(eie_lambda(net, [40, 160]), eie_lambda(again, [40, 160]))


def test_fit_rejects_bad_arguments():
    with pytest.raises(ValueError, match="N_max must be larger"):
        fit_eie(16, 100, 50, progress=False)
    with pytest.raises(ValueError, match="n_sampling"):
        fit_eie(16, 100, 200, n_sampling="normal", progress=False)
