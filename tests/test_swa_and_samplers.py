"""torch.optim.swa_utils (AveragedModel with each averaging rule, SWALR, update_bn) and the
samplers and dataset added to torch.utils.data (WeightedRandomSampler, DistributedSampler,
StackDataset) against PyTorch on the same seeds and inputs."""
import warnings

import numpy as np
import pytest

import symgrad

X = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)

RULES = {
    "swa": lambda T: {},
    "swa with buffers": lambda T: {"use_buffers": True},
    "ema lists": lambda T: {"multi_avg_fn": T.optim.swa_utils.get_ema_multi_avg_fn(0.9)},
    "ema one by one": lambda T: {"avg_fn": T.optim.swa_utils.get_ema_avg_fn(0.9), "use_buffers": True},
    "swa lists": lambda T: {"multi_avg_fn": T.optim.swa_utils.get_swa_multi_avg_fn()},
}


def swa_run(T, rule):
    """Four SGD steps under SWALR, averaging after each; the averaged state before and after
    ``update_bn``, the rates, and the averaged model's output."""
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.BatchNorm1d(4), T.nn.ReLU(), T.nn.Linear(4, 2))
    averaged = T.optim.swa_utils.AveragedModel(model, **RULES[rule](T))
    optimizer = T.optim.SGD(model.parameters(), lr=0.1)
    scheduler = T.optim.swa_utils.SWALR(optimizer, swa_lr=0.05, anneal_epochs=3)
    x, rates = T.tensor(X), []
    for _ in range(4):
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
        averaged.update_parameters(model)
        scheduler.step()
        rates.append(scheduler.get_last_lr()[0])
    states = [{k: v.detach().numpy().copy() for k, v in averaged.state_dict().items()}]
    T.optim.swa_utils.update_bn([x[:3], (x[3:],)], averaged)
    states.append({k: v.detach().numpy().copy() for k, v in averaged.state_dict().items()})
    return states, rates, averaged(x).detach().numpy()


@pytest.mark.parametrize("rule", list(RULES))
def test_averaged_model_is_pytorchs(torch, rule):
    (states, rates, out), (expected, their_rates, their_out) = (swa_run(T, rule) for T in (symgrad, torch))
    assert rates == their_rates
    for mine, theirs in zip(states, expected, strict=True):
        assert list(mine) == list(theirs)
        for key, value in theirs.items():
            assert mine[key].dtype == value.dtype, key
            np.testing.assert_allclose(mine[key], value, rtol=1e-6, atol=1e-7, err_msg=key)
    np.testing.assert_allclose(out, their_out, rtol=1e-6, atol=1e-6)


def test_swalr_schedules_save_and_errors(torch):
    seen = []
    for T in (symgrad, torch):
        p = T.nn.Parameter(T.ones(2))
        optimizer = T.optim.SGD([{"params": [p]}, {"params": [T.nn.Parameter(T.ones(1))], "lr": 0.3}], lr=1.0)
        scheduler = T.optim.swa_utils.SWALR(optimizer, swa_lr=[0.1, 0.2], anneal_epochs=4, anneal_strategy="linear")
        rates = []
        for _ in range(6):
            optimizer.step()
            scheduler.step()
            rates.append(scheduler.get_last_lr())
        state = scheduler.state_dict()
        errors = []
        for call in (lambda: T.optim.swa_utils.SWALR(optimizer, 0.1, anneal_strategy="step"),
                     lambda: T.optim.swa_utils.SWALR(optimizer, 0.1, anneal_epochs=-1),
                     lambda: T.optim.swa_utils.SWALR(optimizer, [0.1]),
                     lambda: T.optim.swa_utils.get_ema_multi_avg_fn(1.5)):
            with pytest.raises(ValueError) as caught:
                call()
            errors.append(str(caught.value))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scheduler.get_lr()
        seen.append((rates, sorted(state), errors, [str(w.message) for w in caught]))
    assert seen[0] == seen[1]


def test_samplers_draw_pytorchs_indices(torch):
    seen = []
    for T in (symgrad, torch):
        T.manual_seed(3)
        weights = [0.1, 2.0, 0.0, 1.5, 0.4]
        sampler = T.utils.data.WeightedRandomSampler(weights, 8)
        generator = T.Generator()
        generator.manual_seed(5)
        once = T.utils.data.WeightedRandomSampler(T.tensor(weights), 4, replacement=False, generator=generator)
        dataset = T.utils.data.TensorDataset(T.arange(10.0))
        distributed = T.utils.data.distributed.DistributedSampler(dataset, num_replicas=3, rank=1)
        epochs = [list(distributed)]
        distributed.set_epoch(2)
        epochs.append(list(distributed))
        cut = T.utils.data.DistributedSampler(dataset, num_replicas=4, rank=3, drop_last=True, shuffle=False)
        seen.append((list(sampler), list(sampler), list(once), len(sampler), epochs, len(distributed), list(cut),
                     len(cut)))
    assert seen[0] == seen[1]


def test_stack_dataset_and_a_loader_over_it(torch):
    seen = []
    for T in (symgrad, torch):
        inputs = T.utils.data.TensorDataset(T.arange(10.0))
        stacked, named = T.utils.data.StackDataset(inputs, T.arange(10)), T.utils.data.StackDataset(x=inputs,
                                                                                                      y=T.arange(10))
        sampler = T.utils.data.DistributedSampler(named, num_replicas=3, rank=0, seed=4)
        batches = [{k: (v[0] if k == "x" else v).tolist() for k, v in batch.items()}
                   for batch in T.utils.data.DataLoader(named, batch_size=3, sampler=sampler)]
        seen.append((repr(stacked[3]), repr(named[4]), repr(stacked.__getitems__([1, 2])), len(stacked), batches))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("call", [
    lambda T: T.utils.data.WeightedRandomSampler([1.0, 2.0], 0),
    lambda T: T.utils.data.WeightedRandomSampler([1.0, 2.0], 2, replacement=1),
    lambda T: T.utils.data.WeightedRandomSampler([[1.0, 2.0]], 2),
    lambda T: T.utils.data.DistributedSampler([1, 2, 3], num_replicas=2, rank=2),
    lambda T: T.utils.data.StackDataset([1, 2], [3]),
    lambda T: T.utils.data.StackDataset([1], y=[2]),
    lambda T: T.utils.data.StackDataset(),
], ids=["num_samples", "replacement", "2-d weights", "rank", "lengths", "both kinds", "none"])
def test_pytorchs_errors(torch, call):
    seen = []
    for T in (symgrad, torch):
        with pytest.raises(ValueError) as caught:
            call(T)
        seen.append(str(caught.value))
    assert seen[0] == seen[1]
