"""torch versions: the range torch_tpu builds against, and the one its extension was built
with, checked at import with errors that name them."""

import pytest
import torch

from torch_tpu._runtime import versions


@pytest.mark.parametrize("installed", ["2.10.2", "2.14.0", "3.0.0", "2.1.0"])
def test_a_torch_outside_the_range_is_refused_by_name(installed):
    with pytest.raises(
        ImportError, match=rf"supports torch 2\.11, 2\.12 and 2\.13, but torch {installed}"
    ):
        versions.check_torch(installed, built_with=installed)


@pytest.mark.parametrize("installed", ["2.11.0+cu130", "2.12.1", "2.13.0+cpu"])
def test_every_release_of_the_range_is_accepted(installed):
    versions.check_torch(installed, built_with=installed.split("+")[0])


def test_an_extension_built_for_another_torch_is_refused_with_the_fix():
    with pytest.raises(
        ImportError, match=r"built against torch 2\.11\.0, but torch 2\.13\.0.*pip install"
    ):
        versions.check_torch("2.13.0+cpu", built_with="2.11.0+cu130")


def test_no_build_record_only_checks_the_range():
    versions.check_torch("2.12.0", built_with="")  # "" as read from an empty record: no check
    with pytest.raises(ImportError):
        versions.check_torch("2.9.0", built_with="")


def test_the_build_recorded_the_running_torch():
    # CMake writes the record beside the extension; this build was made with this torch.
    assert versions._built_with() is not None, f"no {versions.BUILD_RECORD}: rebuild"
    assert versions._built_with().split("+")[0] == torch.__version__.split("+")[0]
    versions.check_torch()  # what import torch_tpu ran
