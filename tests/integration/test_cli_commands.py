"""The command line builds only the named command's parser: the same parser as the full one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flamino_core.cli import COMMAND_MODULES, COMMANDS, build_parser


def commands_of(parser) -> dict:
    """The parser's subcommands, name -> parser, in declaration order."""
    (action,) = [a for a in parser._actions if a.dest == "command"]
    return dict(action.choices)


def test_every_command_is_mapped_to_the_module_that_declares_it():
    declared = {}
    for name in COMMAND_MODULES:
        for command in commands_of(build_parser(next(c for c, m in COMMANDS.items() if m == name))):
            declared[command] = name
    assert declared == COMMANDS
    assert list(commands_of(build_parser())) == list(COMMANDS)  # --help's order: the modules' order


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_alone_parses_and_helps_as_in_the_full_parser(command):
    alone, full = commands_of(build_parser(command))[command], commands_of(build_parser())[command]
    assert alone.format_help() == full.format_help()
    assert [a.option_strings for a in alone._actions] == [a.option_strings for a in full._actions]


def test_an_unknown_command_gets_the_full_list_of_choices(capsys):
    from flamino_core.cli import main

    assert main(["embd"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'embd'" in err and all(command in err for command in COMMANDS)


def test_embed_imports_no_other_command_module():
    code = ("import contextlib, io, sys\nfrom flamino_core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['embed', '--help']) == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith('flamino_core.cli.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(loaded) == ["flamino_core.cli.common", "flamino_core.cli.embed"]


def test_reading_a_fasta_file_loads_no_structure_numbering(tmp_path):
    """Every FASTA argument is asked whether it is a structure file; the answer needs neither
    the structure reader nor the author-numbering code a structure's records carry."""
    fasta = tmp_path / "one.fa"
    fasta.write_text(">p1\nMKTAYIAKQRQISFVKSHFSRQ\n")
    code = ("import sys\nfrom flamino_core.cli.common import read_records\n"
            f"records, _ = read_records({str(fasta)!r})\nassert records[0].sequence == 'MKTAYIAKQRQISFVKSHFSRQ'\n"
            "print(sorted(m for m in sys.modules if m.startswith(('flamino_core.variants', 'flamino_core.structure.files.reading', 'Bio.PDB'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(loaded) == []
