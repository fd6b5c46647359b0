"""The opt-in bf16 mode on a CPU (issue 52): allowed where the CPU multiplies bf16 (AVX512_BF16,
AMX, Arm BF16), refused with the reason where it would only be emulated, in ``hardware.choose``,
the CLI and the app; ``FLAMINO_ALLOW_EMULATED_BF16=1`` runs it emulated anyway, labelled.

The machines are described from /proc/cpuinfo text as Linux prints it (``hardware.cpu_from_cpuinfo``
and ``hardware.hardware_from``: the same path ``detect()`` takes on this machine), so the
decision is checked for CPUs this machine is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from flamino_core.cli import main
from flamino_core.engine import hardware

# The flags line of the 2-core AMD EPYC (Zen 4) these numbers were measured on, 2026-12-07.
ZEN4 = ("processor       : 0\n"
        "vendor_id       : AuthenticAMD\n"
        "model name      : AMD EPYC\n"
        "flags           : fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush "
        "mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl "
        "xtopology nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 "
        "sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm "
        "cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext cpuid_fault vmmcall fsgsbase "
        "tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt "
        "clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx512_bf16 clzero xsaveerptr "
        "arat avx512vbmi umip avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq "
        "rdpid fsrm\n")
# A Zen 3 AMD EPYC (AVX2 and FMA, no AVX-512, no AMX), as a VM's /proc/cpuinfo prints it.
ZEN3 = ("processor       : 0\n"
        "vendor_id       : AuthenticAMD\n"
        "model name      : AMD EPYC 7B13\n"
        "flags           : fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush "
        "mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl "
        "nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic "
        "movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a "
        "misalignsse 3dnowprefetch osvw topoext invpcid_single ssbd ibrs ibpb stibp vmmcall fsgsbase "
        "tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec "
        "xgetbv1 xsaves clzero xsaveerptr arat npt nrip_save umip vaes vpclmulqdq rdpid fsrm\n")
# Arm: Neoverse N1 (no BF16) and V1 (BF16), their "Features" lines.
NEOVERSE_N1 = ("Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
               "dcpop asimddp ssbs\n")
NEOVERSE_V1 = ("Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
               "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg "
               "dcpodp svei8mm svebf16 i8mm bf16 dgh rng\n")


def cpu(cpuinfo: str) -> hardware.Hardware:
    return hardware.hardware_from(*hardware.cpu_from_cpuinfo(cpuinfo), "cpu")


@pytest.fixture
def on(monkeypatch):
    """``on(cpuinfo)``: this process's hardware is that CPU's (for choose, the CLI and the app)."""
    monkeypatch.delenv(hardware.PRECISION_ENV, raising=False)
    monkeypatch.delenv(hardware.EMULATED_BF16_ENV, raising=False)
    monkeypatch.delenv(hardware.ATTENTION_ENV, raising=False)

    def use(cpuinfo: str) -> hardware.Hardware:
        hw = cpu(cpuinfo)
        monkeypatch.setattr(hardware, "detect", lambda: hw)
        return hw

    return use


def test_cpuinfo_is_read_into_the_model_and_the_flags_that_matter():
    model, flags = hardware.cpu_from_cpuinfo(ZEN4)
    assert model == "AMD EPYC" and "avx512_bf16" in flags and "fpu" in flags
    assert cpu(ZEN4).cpu_features == ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16")
    assert cpu(ZEN3).cpu_features == ("avx2", "fma")
    assert cpu(NEOVERSE_V1).cpu_features == ("asimd", "bf16", "sve")


def test_bf16_is_refused_on_a_cpu_without_bf16_arithmetic_and_says_why(on):
    hw = on(ZEN3)
    assert not hw.native_bf16
    with pytest.raises(hardware.PrecisionRefused) as refused:
        hardware.choose(64, precision="bf16")
    message = str(refused.value)
    assert "AMD EPYC 7B13" in message and "no AVX512_BF16 / AMX / Arm BF16" in message
    assert "fp32" in message and hardware.EMULATED_BF16_ENV in message  # what to do instead
    with pytest.raises(hardware.PrecisionRefused, match="no AVX512_BF16"):
        hardware.refuse_precision("bf16")
    # The other modes run there, and nothing is refused when bf16 is not asked for.
    assert hardware.choose(64, precision="fp32").precision == "fp32"
    assert hardware.choose(64, precision="int8").precision == "int8"
    hardware.refuse_precision()


def test_bf16_asked_through_the_environment_is_refused_too(on, monkeypatch):
    on(NEOVERSE_N1)
    monkeypatch.setenv(hardware.PRECISION_ENV, "bf16")
    with pytest.raises(hardware.PrecisionRefused, match="no native bf16"):
        hardware.choose(64)


@pytest.mark.parametrize("cpuinfo, flag", [(ZEN4, "avx512_bf16"), (NEOVERSE_V1, "bf16")])
def test_bf16_runs_where_the_cpu_multiplies_bf16(on, cpuinfo, flag):
    hw = on(cpuinfo)
    assert hw.native_bf16 and flag in hw.native_bf16_why
    backend = hardware.choose(64, precision="bf16")
    assert backend.precision == "bf16" and backend.precision_why == ""
    assert "bf16 matmuls with fp32 accumulation" in backend.describe() and "emulated" not in backend.describe()
    hardware.refuse_precision("bf16")


def test_the_escape_hatch_runs_bf16_emulated_and_labels_it(on, monkeypatch):
    on(ZEN3)
    monkeypatch.setenv(hardware.EMULATED_BF16_ENV, "1")
    backend = hardware.choose(64, precision="bf16")
    assert backend.precision == "bf16"
    assert f"emulated, {hardware.EMULATED_BF16_ENV}=1" in backend.describe()
    monkeypatch.setenv(hardware.EMULATED_BF16_ENV, "yes")  # only 1 opens it
    with pytest.raises(hardware.PrecisionRefused):
        hardware.choose(64, precision="bf16")


def test_the_cli_refuses_before_loading_a_model(on, monkeypatch, tmp_path, capsys):
    """``FLAMINO_PRECISION=bf16 flamino embed`` on such a CPU: exit 2 with the reason, and no
    weights read (the refusal comes before the model is loaded)."""
    from flamino_core.weights import loading

    on(ZEN3)
    monkeypatch.setenv(hardware.PRECISION_ENV, "bf16")
    monkeypatch.setattr(loading, "load_weights", lambda *a, **k: pytest.fail("weights loaded before the refusal"))
    fasta = tmp_path / "one.fa"
    fasta.write_text(">p\nMKTAYIAKQRQISFVKSHFSRQ\n")
    assert main(["embed", str(fasta), "-o", str(tmp_path / "out.npz"), "--model", "random:tiny"]) == 2
    err = capsys.readouterr().err
    assert "precision bf16 is refused" in err and "no AVX512_BF16 / AMX / Arm BF16" in err


def test_the_app_says_why_where_the_model_would_load(on, monkeypatch, tmp_path):
    """A server started with FLAMINO_PRECISION=bf16 on such a CPU shows the refusal in the
    model's error panel instead of running bf16 emulated."""
    on(ZEN3)
    monkeypatch.setenv(hardware.PRECISION_ENV, "bf16")
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=180).run()
    errors = " ".join(e.value for e in at.error).replace("\\", "")  # the panel's Markdown escapes
    assert "The model could not be loaded" in errors and "precision bf16 is refused" in errors, errors
    assert "no AVX512_BF16 / AMX / Arm BF16" in errors


def test_the_cli_runs_bf16_where_the_cpu_has_it_and_labels_its_numbers(on, monkeypatch, tmp_path, capsys):
    """Allowed on an AVX512_BF16 CPU, and stderr says the numbers are the opt-in mode's (on a CI
    machine without the flag the same tiny model runs emulated: this checks the decision and the
    label, not the speed)."""
    on(ZEN4)
    monkeypatch.setenv(hardware.PRECISION_ENV, "bf16")
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    fasta = tmp_path / "one.fa"
    fasta.write_text(">p\nMKTAYIAKQRQISFVKSHFSRQ\n")
    assert main(["embed", str(fasta), "-o", str(tmp_path / "out.npz"), "--model", "random:tiny"]) == 0
    err = capsys.readouterr().err
    assert "note: precision bf16 matmuls with fp32 accumulation (opt-in; not reference numbers)" in err, err
