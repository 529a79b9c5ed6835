"""MLPerf's accelerator names against nvidia-smi's, as timing jobs are placed by them."""

import pytest

from runners.matching import model_of, same_accelerator


@pytest.mark.parametrize(("system", "runner"), [
    ("NVIDIA H100-SXM5-80GB", "NVIDIA H100 80GB HBM3"),
    ("NVIDIA H100-SXM5-80GB", "NVIDIA H100 80 GB HBM3"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
    ("NVIDIA A100-PCIe-40GB", "NVIDIA A100-PCIE-40GB"),
    ("NVIDIA H200-SXM-141GB", "NVIDIA H200"),  # nvidia-smi may leave the memory out
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("AMD Instinct MI300X", "AMD Instinct MI300X"),
])
def test_the_same_accelerator_under_two_spellings(system: str, runner: str) -> None:
    assert same_accelerator(system, runner)


@pytest.mark.parametrize(("system", "runner"), [
    ("NVIDIA H100-SXM5-80GB", "NVIDIA H200"),  # another model
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"),  # another memory size
    ("NVIDIA H100-SXM5-80GB", "NVIDIA H100 PCIe"),  # another form factor
    ("NVIDIA H100 NVL", "NVIDIA H100 80GB HBM3"),
    ("NVIDIA H100-SXM5-80GB", "cpu"),
    ("NVIDIA H100-SXM5-80GB", ""),
    ("", "NVIDIA H100 80GB HBM3"),
])
def test_different_accelerators(system: str, runner: str) -> None:
    assert not same_accelerator(system, runner)


def test_the_model_token_skips_sizes_and_form_factors() -> None:
    assert model_of("NVIDIA H100 SXM5 80GB HBM3") == "H100"
    assert model_of("Google TPU v5e") == "V5E"
    assert model_of("Intel Xeon Platinum") is None
