"""The CPU path for pixel networks: native-bf16 detection, the doctor's line, channels-last weights."""

import torch

from rlrun.doctor import bf16_line
from rlrun.nets.networks import QNetwork
from rlrun.training import device as devices
from rlrun.training.device import memory_format, native_bf16_flags

EPYC_ZEN4 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n\nprocessor\t: 1\nflags\t: fpu\n"
XEON_UNDER_KVM = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx2 avx512f avx512_vnni\n"
SAPPHIRE_RAPIDS = "flags\t\t: avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_native_bf16_flags_read_the_first_processors_flags():
    assert native_bf16_flags(EPYC_ZEN4) == ["avx512_bf16"]
    assert native_bf16_flags(XEON_UNDER_KVM) == []
    assert native_bf16_flags(SAPPHIRE_RAPIDS) == ["avx512_bf16", "amx_bf16"]
    assert native_bf16_flags(ARM) == ["bf16"]
    assert native_bf16_flags("") == []
    assert native_bf16_flags("flags\t: avx512_bf16x\n") == []  # whole flags only


def test_doctor_says_whether_bf16_is_native():
    assert bf16_line(["avx512_bf16"]).startswith("native (avx512_bf16)")
    assert bf16_line([]).startswith("emulated") and "slower than fp32" in bf16_line([])
    assert bf16_line(None).startswith("unknown")


def test_emulated_bf16_warns_on_the_cpu_only(monkeypatch, capsys):
    monkeypatch.setattr(devices, "cpu_bf16", lambda: [])
    devices.warn_emulated_bf16("bf16", torch.device("cpu"))
    assert "device.amp=bf16 on a CPU without native bf16" in capsys.readouterr().err
    for amp, kind in (("none", "cpu"), ("bf16", "meta")):
        devices.warn_emulated_bf16(amp, torch.device(kind))
    monkeypatch.setattr(devices, "cpu_bf16", lambda: ["amx_bf16"])
    devices.warn_emulated_bf16("bf16", torch.device("cpu"))
    assert capsys.readouterr().err == ""


def test_channels_last_is_on_for_the_nature_cnn_on_the_cpu_by_default_and_as_asked():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert memory_format(None, cpu, "nature_cnn") == torch.channels_last
    assert memory_format(None, cpu, "der_cnn") == torch.contiguous_format  # measured no faster
    assert memory_format(None, cuda, "nature_cnn") == torch.contiguous_format
    assert memory_format(False, cpu, "nature_cnn") == torch.contiguous_format
    assert memory_format(True, cuda, "der_cnn") == torch.channels_last


def test_channels_last_weights_compute_the_same_q_values_and_checkpoints_load_either_way():
    torch.manual_seed(0)
    plain = QNetwork(0, 6, obs_shape=[4, 84, 84], encoder="nature_cnn", hidden_sizes=[512])
    last = QNetwork(0, 6, obs_shape=[4, 84, 84], encoder="nature_cnn", hidden_sizes=[512])
    last.load_state_dict(plain.state_dict())
    last = last.to(memory_format=torch.channels_last)
    conv = next(m for m in last.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) and not conv.weight.is_contiguous()
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    torch.testing.assert_close(last(frames), plain(frames), rtol=1e-5, atol=1e-5)
    fresh = QNetwork(0, 6, obs_shape=[4, 84, 84], encoder="nature_cnn", hidden_sizes=[512])
    fresh.load_state_dict(last.state_dict())  # a channels-last run's model.pt loads into a contiguous network
    torch.testing.assert_close(fresh(frames), plain(frames), rtol=1e-5, atol=1e-5)
