"""``--precision`` on the commands that run a language model (#65): read into an
``options.Precision`` at argparse, it reaches the engine (over ``$FLAMINO_PRECISION``), and a mode
this machine would only emulate is refused before any weight is read, with the hardware's reason
(``hardware.PrecisionRefused``'s message) and no traceback."""

from __future__ import annotations

import pytest

from flamino_core.cli import build_parser, main
from flamino_core.engine import hardware
from flamino_core.options import Precision

COMMANDS = ("embed", "score", "contacts", "variants", "dms", "fit", "predict", "suggest")


@pytest.fixture
def fasta(tmp_path):
    path = tmp_path / "one.fa"
    path.write_text(">a\nMKTAYIAKQRQISFVKSHFSRQ\n")
    return path


@pytest.fixture
def built(monkeypatch):
    """The precision of every engine the command builds."""
    from flamino_core.engine.engine import Engine

    seen, real = [], Engine.__init__

    def recording(self, *args, **kwargs):
        real(self, *args, **kwargs)
        seen.append(self.backend.precision)

    monkeypatch.setattr(Engine, "__init__", recording)
    return seen


@pytest.mark.parametrize("command", COMMANDS)
def test_each_language_model_command_reads_precision_into_its_value(command):
    import argparse

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    flag = next(a for a in commands[command]._actions if "--precision" in a.option_strings)
    assert flag.type("INT8") is Precision.INT8 and flag.default is None  # None: $FLAMINO_PRECISION, else fp32


def test_an_unknown_precision_is_a_usage_error(fasta, capsys):
    assert main(["embed", str(fasta), "--precision", "fp16", "-o", "x.npz"]) == 2
    assert "'fp16': choose one of fp32, bf16, int8" in capsys.readouterr().err


def test_the_flag_reaches_the_engine_over_the_environment(fasta, tmp_path, monkeypatch, built, capsys):
    monkeypatch.setenv("FLAMINO_PRECISION", "fp32")
    assert main(["embed", str(fasta), "-m", "random:tiny", "--precision", "int8", "-o", str(tmp_path / "e.npz")]) == 0
    assert built == [Precision.INT8]
    assert "note: precision int8" in capsys.readouterr().err  # labelled, as $FLAMINO_PRECISION's modes are
    monkeypatch.setenv("FLAMINO_PRECISION", "int8")
    assert main(["embed", str(fasta), "-m", "random:tiny", "--precision", "fp32", "-o", str(tmp_path / "f.npz")]) == 0
    assert built[-1] == Precision.FP32


def test_bf16_where_it_would_be_emulated_is_refused_clearly(fasta, tmp_path, monkeypatch, built, capsys):
    no_bf16 = hardware.hardware_from("a CPU without bf16", {"avx2", "fma"}, "cpu")
    monkeypatch.setattr(hardware, "detect", lambda: no_bf16)
    monkeypatch.delenv("FLAMINO_ALLOW_EMULATED_BF16", raising=False)
    monkeypatch.delenv("FLAMINO_PRECISION", raising=False)
    from flamino_core.weights import loading

    loaded, real_load = [], loading.load_weights
    monkeypatch.setattr(loading, "load_weights", lambda *a, **k: loaded.append(a) or real_load(*a, **k))
    status = main(["score", str(fasta), "-m", "random:tiny", "--precision", "bf16", "-o", str(tmp_path / "s.csv")])
    err = capsys.readouterr().err
    assert status == 2 and loaded == [] and built == []  # refused before the model was drawn
    assert "precision bf16 is refused on this machine (a CPU without bf16)" in err
    assert "no --precision" in err and "Traceback" not in err
