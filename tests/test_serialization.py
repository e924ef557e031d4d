"""Saving, loading, pickling and deep-copying tpu tensors and modules."""

import copy
import io
import pickle

import pytest
import torch
from torch import nn


def _module():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))


@pytest.mark.parametrize("zipfile", [True, False])
def test_save_and_load_tpu_state_dict(zipfile):
    model = _module().to("tpu")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer, _use_new_zipfile_serialization=zipfile)
    for map_location, device in ((None, "tpu"), ("cpu", "cpu")):
        buffer.seek(0)
        state = torch.load(buffer, map_location=map_location)
        for name, value in model.state_dict().items():
            assert state[name].device.type == device
            assert torch.equal(state[name].cpu(), value.cpu())


def test_load_cpu_checkpoint_onto_tpu():
    model = _module()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="tpu")
    target = _module().to("tpu")
    target.load_state_dict(state)
    x = torch.randn(5, 4)
    torch.testing.assert_close(target(x.to("tpu")).cpu(), model(x))


def test_views_survive_a_round_trip():
    base = torch.arange(12.0, device="tpu")
    buffer = io.BytesIO()
    torch.save({"base": base, "view": base[2:8:2]}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert torch.equal(loaded["view"].cpu(), torch.arange(12.0)[2:8:2])
    loaded["base"][2] = -1  # still one storage after loading
    assert loaded["view"][0].item() == -1


def test_pickle_and_deepcopy_of_a_tpu_module():
    model = _module().to("tpu")
    for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert clone[0].weight.device.type == "tpu"
        assert torch.equal(clone[0].weight.cpu(), model[0].weight.cpu())
        assert clone[0].weight.data_ptr() != model[0].weight.data_ptr()
