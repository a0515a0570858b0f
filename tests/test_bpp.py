"""3D bin packing: height-map geometry against brute force, the checker, heuristics, the two-decision
policy, and the study driver end to end."""

import numpy as np
import pytest
import torch

from eie import comparison, extrapolation, heuristics_table, scaling, study
from eie.attention import Attention
from eie.model import AttentionModel
from eie.problems import BPP, heightmap, make_problem
from eie.problems.base import InfeasibleSolution
from eie.problems.bpp_heuristics import heuristic_load_rates, heuristic_solution
from eie.problems.heightmap import footprint_sums, lowest_placements, oriented, place, resting_heights


def test_resting_heights_and_sums_match_brute_force():
    g = torch.Generator().manual_seed(0)
    heights = torch.randint(0, 60, (3, 23, 17), generator=g)
    dims = torch.randint(1, 12, (3, 3), generator=g)
    rest, sums = resting_heights(heights, dims), footprint_sums(heights, oriented(dims)[..., :2])
    for b in range(3):
        for o, (l, w, _) in enumerate(oriented(dims)[b].tolist()):
            for x in range(23):
                for y in range(17):
                    if x + l <= 23 and y + w <= 17:
                        window = heights[b, x:x + l, y:y + w]
                        assert rest[b, o, x, y] == window.max() and sums[b, o, x, y] == window.sum()
                    else:
                        assert rest[b, o, x, y] == float("inf")


def test_the_placement_kernel_matches_brute_force_and_the_torch_path(monkeypatch):
    """`lowest_placements`: the compiled CPU kernel and the torch composition (what runs on a GPU) give
    the same lowest resting heights, y and trapped volumes, and they are the brute-force ones; boxes
    that fit nowhere in some orientation, flat and random maps included."""
    g = torch.Generator().manual_seed(0)
    heights = torch.randint(0, 60, (4, 23, 17), generator=g)
    heights[0] = 0  # flat: every y ties, the smallest wins
    dims = torch.randint(1, 20, (4, 3), generator=g)
    dims[1] = torch.tensor([24, 5, 3])  # too long for the bin along x in some orientations
    kernel = lowest_placements(heights, dims)
    monkeypatch.setattr(heightmap, "CPU_KERNEL", False)
    composed = lowest_placements(heights, dims)
    for a, b in zip(kernel, composed, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)
    low, y, trapped = kernel
    assert torch.isinf(low).any() and torch.isfinite(low).any()
    for b in range(4):
        for o, (l, w, _) in enumerate(oriented(dims)[b].tolist()):
            for x in range(23):
                rests = [int(heights[b, x:x + l, j:j + w].max()) for j in range(17 - w + 1)] if x + l <= 23 else []
                if not rests:
                    assert low[b, o, x] == float("inf") and y[b, o, x] == 0
                    continue
                j = rests.index(min(rests))
                assert low[b, o, x] == min(rests) and y[b, o, x] == j
                assert trapped[b, o, x] == l * w * min(rests) - int(heights[b, x:x + l, j:j + w].sum())


def test_place_drops_the_box_onto_the_highest_point():
    heights = torch.zeros(1, 6, 6, dtype=torch.long)
    heights[0, 2, 2] = 5
    new, z = place(heights, torch.tensor([1]), torch.tensor([1]), torch.tensor([[3, 2, 4]]))
    assert z.item() == 5 and (new[0, 1:4, 1:3] == 9).all() and new[0, 0].sum() == 0 and new[0, 2, 3] == 0


def test_load_rate_and_checker():
    problem = BPP(50, 50)
    instance = {"dims": torch.tensor([[[50, 50, 10], [10, 50, 50]]])}
    # Box 0 flat on the floor, box 1 lying on top of it (rotated to 50 x 50 x 10): height 20, full.
    solution = torch.tensor([[[0, 0, 0, 0, 50, 50, 10], [1, 0, 0, 10, 50, 50, 10]]])
    problem.check(instance, solution)
    assert problem.load_rate(instance, solution).item() == pytest.approx(100.0)
    assert problem.cost(instance, solution).item() == pytest.approx(-100.0)
    bad = {
        "overlap": [[0, 0, 0, 0, 50, 50, 10], [1, 0, 0, 5, 50, 50, 10]],
        "outside": [[0, 0, 0, 0, 50, 50, 10], [1, 1, 0, 10, 50, 50, 10]],
        "twice": [[0, 0, 0, 0, 50, 50, 10], [0, 0, 0, 10, 50, 50, 10]],
        "wrong edges": [[0, 0, 0, 0, 50, 50, 10], [1, 0, 0, 10, 50, 40, 10]],
    }
    for _name, rows in bad.items():
        with pytest.raises(InfeasibleSolution):
            problem.check(instance, torch.tensor([rows]))


def test_checker_catches_overlap_in_random_packings():
    problem = BPP(60, 60)
    g = torch.Generator().manual_seed(1)
    instance = problem.generate(6, 12, g)
    solution = heuristic_solution(problem, instance, "volume")
    problem.check(instance, solution)
    broken = solution.clone()
    broken[:, 1, 1:4] = broken[:, 0, 1:4]  # box 1 moved onto box 0's corner: they overlap
    with pytest.raises(InfeasibleSolution, match="instances \\[0, 1, 2, 3, 4"):
        problem.check(instance, broken)


def test_heuristics_pack_feasibly_and_sorting_helps():
    problem = BPP(120, 100)
    instance = problem.generate(6, 30, torch.Generator().manual_seed(2))
    rates = heuristic_load_rates(problem, instance)  # each packing checked inside
    assert set(rates) == {"longest_edge", "volume", "as_generated"}
    assert all(((0 < r) & (r <= 100)).all() for r in rates.values())
    assert rates["volume"].mean() > rates["as_generated"].mean()
    with pytest.raises(ValueError, match="unknown box order"):
        heuristic_solution(problem, instance, "colour")


def test_notebook_05_packs_each_heuristic_once_per_test_set(tmp_path, monkeypatch):
    from eie.evaluation import fixed_test_set
    from eie.evaluation_store import EvaluationStore
    from eie.problems import bpp_heuristics

    packed = []
    original = bpp_heuristics.heuristic_solution
    monkeypatch.setattr(bpp_heuristics, "heuristic_solution",
                        lambda problem, instance, key: packed.append(key) or original(problem, instance, key))
    monkeypatch.setattr(bpp_heuristics, "_RECENT_RATES", {})
    problem = BPP(60, 50)
    reference = problem.reference_costs({k: v[:3] for k, v in fixed_test_set(problem, 8, 5).items()})  # the evaluation's
    assert len(packed) == 3
    store = EvaluationStore(tmp_path / "store")
    table = heuristics_table.heuristics_table([problem], [8], 3, store=store)  # the same 3 instances: nothing packed again
    assert len(packed) == 3
    assert np.isclose(-reference.mean(), table.load_rate.max())
    monkeypatch.setattr(bpp_heuristics, "_RECENT_RATES", {})  # another process: read back from the run's store
    again = heuristics_table.heuristics_table([problem], [8], 3, store=store)
    assert len(packed) == 3 and again.equals(table)
    heuristics_table.heuristics_table([problem], [8], 4, store=store)  # other instances are packed
    assert len(packed) == 6


def test_policy_packs_feasibly_and_is_equivariant_in_the_boxes():
    torch.manual_seed(0)
    problem = make_problem("bpp", length=60, width=50)
    model = AttentionModel(problem, Attention(scaling.ln_d(16))).eval()
    instance = problem.generate(3, 9, torch.Generator().manual_seed(3))
    with torch.no_grad():
        greedy, log_likelihood = model.rollout(instance)
        sampled, _ = model.rollout(instance, "sample", generator=torch.Generator().manual_seed(4))
    problem.check(instance, greedy)
    problem.check(instance, sampled)
    assert greedy.shape == (3, 9, 7) and torch.isfinite(log_likelihood).all()
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        a = model.first_step_log_probs(instance)[:, perm]
        b = model.first_step_log_probs({"dims": instance["dims"][:, perm]})
    assert torch.allclose(a, b, atol=1e-5)


def test_shared_frontier_convolutions_give_the_separate_ones_numbers(monkeypatch):
    """The step context runs the placement head's convolutions with its own (one grouped convolution,
    channels-last frontier): the same draws, log-likelihood and gradients as each encoder on its own
    in the plain layout; a deep copy (the training baseline) shares with its own head, not the original's."""
    import copy

    from eie.problems import bpp

    torch.manual_seed(0)
    problem = make_problem("bpp", length=60, width=50)
    model = AttentionModel(problem, Attention(scaling.inv_sqrt_d(16)))
    context, head = model.decoder.step_context, model.action_head.frontier
    assert context._shares_with == (head,) and "decoder.step_context._shares_with" not in dict(model.named_modules())
    twin = copy.deepcopy(model)
    assert twin.decoder.step_context._shares_with[0] is twin.action_head.frontier
    instance = problem.generate(4, 8, torch.Generator().manual_seed(1))
    runs = []
    for shared in (True, False):
        monkeypatch.setattr(bpp, "FRONTIER_CHANNELS_LAST", shared)
        context.share_convolutions(*((head,) if shared else ()))
        model.zero_grad()
        solution, log_likelihood = model.rollout(instance, "sample", generator=torch.Generator().manual_seed(2))
        log_likelihood.sum().backward()
        runs.append((solution, log_likelihood.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (a, la, ga), (b, lb, gb) = runs
    assert torch.equal(a, b) and torch.allclose(la, lb, atol=1e-5)
    assert len(ga) == len(gb) > 0 and all(torch.allclose(x, y, atol=1e-5) for x, y in zip(ga, gb, strict=True))
    context.share_convolutions(head)
    state = problem.initial_state(instance)
    context(state)
    assert list(state.frontier_codes) == [id(head)]  # its own code read and dropped, the head's waiting
    head(state)
    assert state.frontier_codes == {}


def test_bad_bins_and_sizes_are_refused():
    with pytest.raises(ValueError, match="footprint"):
        BPP(40, 100)
    with pytest.raises(ValueError, match="n >= 1"):
        BPP().generate(2, 0)


def test_study_trains_and_evaluates_bpp_with_load_rates(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "results_dir", lambda run="default": tmp_path / run)
    models, log = study.train_models(["inv_sqrt_d"], [0], run="t", device="cpu", progress=False, tag="_60x50",
                                     problem="bpp", problem_options={"length": 60, "width": 50}, n_train=4, epochs=1,
                                     steps_per_epoch=1, batch_size=4, baseline_eval_size=4)
    assert (tmp_path / "t" / "checkpoints" / "bpp_60x50_inv_sqrt_d_n4_seed0.pt").is_file()
    results, rates, references = extrapolation.evaluate(models, extrapolation.bind_methods(["inv_sqrt_d", "log_N"], 16, 4), 4, 8,
                                                test_size=3,
                                                setting="60x50", reference_size=3, device="cpu", progress=False)
    learned = results[results.method != "reference"]
    assert learned.objective.between(0, 100).all()  # load rates, not costs
    reference = results[results.method == "reference"].set_index("n").objective
    for row in learned.itertuples():
        assert row.gap_pct == pytest.approx(100 * (1 - row.objective / reference[row.n]), abs=1e-4)
    assert all(np.all(r > 0) for r in references.values())
    assert comparison.table_by_method(learned, maximise=True).iloc[:, 0].str.startswith("*").sum() == 1


def test_the_in_place_placement_layer_gives_the_straightforward_numbers(monkeypatch):
    """`PlacementHead.hidden` (sum and tanh in place) against tanh(context + W_f features) written
    out: the same draws, log-likelihood and gradients, bit for bit, in a sampled rollout with autograd,
    and the same greedy packing without it."""
    from eie.problems import bpp

    torch.manual_seed(0)
    problem = make_problem("bpp", length=60, width=50)
    model = AttentionModel(problem, Attention(scaling.inv_sqrt_d(16)))
    instance = problem.generate(4, 8, torch.Generator().manual_seed(1))

    def placement_reference(self, features, context):
        return torch.tanh(context[:, None, None, :] + self.features(features))

    runs = []
    for reference in (False, True):
        if reference:
            monkeypatch.setattr(bpp.PlacementHead, "hidden", placement_reference)
        model.zero_grad()
        solution, log_likelihood = model.rollout(instance, "sample", generator=torch.Generator().manual_seed(2))
        log_likelihood.sum().backward()
        with torch.no_grad():
            greedy, _ = model.rollout(instance)
        runs.append((solution, greedy, log_likelihood.detach(), [p.grad.clone() for p in model.parameters()
                                                                 if p.grad is not None]))
    (a, ga, la, grads_a), (b, gb, lb, grads_b) = runs
    assert torch.equal(a, b) and torch.equal(ga, gb) and torch.equal(la, lb)
    assert len(grads_a) == len(grads_b) > 0
    assert all(torch.equal(x, y) for x, y in zip(grads_a, grads_b, strict=True))


def test_the_rule_choices_are_the_heuristics_placements():
    """`rule_choices` over the placement head's candidates picks what `lowest_top_action` picks over
    every corner: the same top height, and the same placement where the rule's tie-break decides."""
    from eie.problems.bpp_heuristics import lowest_top_action, rule_choices
    problem = make_problem("bpp", length=60, width=50)
    instance = problem.generate(6, 12, torch.Generator().manual_seed(8))
    state = problem.initial_state(instance)
    rows = torch.arange(6)
    for step in range(12):
        box = torch.full((6,), step)
        extents, low, y, trapped = state.placement_options(box)
        top = low + extents[..., 2, None].to(low.dtype)
        lowest, choice = rule_choices(top, trapped)
        reference = lowest_top_action(state, box)
        orientation, x = choice // problem.length, choice % problem.length
        ref_extents, rest = state.candidates(box)
        ref_top = rest[rows, reference[:, 1], reference[:, 2], reference[:, 3]] + ref_extents[rows, reference[:, 1], 2]
        assert torch.equal(top[rows, orientation, x], ref_top)
        assert lowest.flatten(1)[rows, reference[:, 1] * problem.length + reference[:, 2]].all()
        state = state.update(reference)


def test_teaching_the_placement_rule_makes_the_head_take_it(tmp_path):
    """`BPP.teach_action_rule`: an untrained head's greedy placement rarely ends the box's top lowest;
    after 120 imitation steps most do, the encoder and pointer are untouched, and the same generator
    seed teaches the same head. A training run with `rule_warm_start` starts from that head and
    resumes exactly; a problem without a rule refuses the option."""
    from eie.problems.bpp_heuristics import rule_choices
    from eie.training import TrainConfig, build_model, train

    def lowest_share(model, instance):
        head, hits, state = model.action_head, 0, model.problem.initial_state(instance)
        with torch.no_grad():
            nodes = model.encode(instance)
            for step in range(instance["dims"].shape[1]):
                box = torch.full((instance["dims"].shape[0],), step)
                log_p, y, top, trapped = head.log_probabilities(state, nodes, box)
                lowest, rule = rule_choices(top, trapped)
                hits += int(lowest.gather(1, log_p.argmax(1, keepdim=True)).sum())
                state = state.update(head.action(box, rule, y))
        return hits / instance["dims"].shape[:2].numel()

    config = TrainConfig(problem="bpp", problem_options={"length": 60, "width": 50}, n_train=10, epochs=2,
                         steps_per_epoch=1, batch_size=8, baseline_eval_size=8, lr=1e-3)
    torch.manual_seed(0)
    model = build_model(config)
    held_out = model.problem.generate(8, 10, torch.Generator().manual_seed(11))
    encoder_before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("action_head")}
    before = lowest_share(model, held_out)
    taught = model.problem.teach_action_rule(model, 120, 10, 8, torch.Generator().manual_seed(1))
    after = lowest_share(model, held_out)
    assert before < 0.5 and after > 0.8 and taught > 0.8, (before, after, taught)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in encoder_before.items())
    torch.manual_seed(0)
    again = build_model(config)
    again.problem.teach_action_rule(again, 120, 10, 8, torch.Generator().manual_seed(1))
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())

    warm = TrainConfig(**{**config.__dict__, "rule_warm_start": 60})
    straight = train(warm, tmp_path / "a", progress=False, device="cpu")
    train(TrainConfig(**{**warm.__dict__, "epochs": 1}), tmp_path / "b", progress=False, device="cpu")
    resumed = train(warm, tmp_path / "b", progress=False, device="cpu")
    for (name, p), q in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert lowest_share(straight.model, held_out) > 0.5
    assert "rule_warm_start" not in config.resume_key() and warm.resume_key()["rule_warm_start"] == 60
    with pytest.raises(ValueError, match="tsp has none"):
        TrainConfig(problem="tsp", rule_warm_start=10)
    with pytest.raises(ValueError, match="rule_warm_start must be >= 0"):
        TrainConfig(problem="bpp", rule_warm_start=-1)
