"""``model_id.ModelId``: every spelling the CLI, the picker and links use, read to one kind."""

import pytest

from flamino_core.model.families import ENSEMBLES
from flamino_core.model.model_id import ModelId
from flamino_core.variants.ensemble import member_columns


@pytest.mark.parametrize("text, kind, preset", [
    ("esm2_t6_8M_UR50D", "preset", "esm2_t6_8M_UR50D"),
    ("  facebook/esm2_t6_8M_UR50D\n", "preset", "esm2_t6_8M_UR50D"),  # the Hub organisation's spelling
    ("EvolutionaryScale/esmc-300m-2024-12", "preset", "esmc_300m_2024_12_v0"),  # ESM C's repository
    ("westlake-repl/SaProt_650M_PDB", "preset", "SaProt_650M_PDB"),
    ("random:tiny", "random", None),
    ("random:esm2_t6_8M_UR50D:3", "random", None),
    ("esm1v_ensemble", "ensemble", None),
    ("ensemble:/m/a,/m/b", "ensemble", None),
    ("/models/esm2_t6_8M_UR50D-flamino", "path", None),  # a checkpoint named after a preset is a path
    ("esm2_t6_8M", "path", None),  # no such preset: load_weights says so
])
def test_each_spelling_has_one_kind(text, kind, preset):
    model_id = ModelId.parse(text)
    assert (model_id.kind, model_id.preset, model_id.text) == (kind, preset, text.strip())
    assert model_id.key == (preset or text.strip())  # what a hosted server's allowed list holds


def test_random_spec_and_members():
    assert ModelId.parse("random:tiny-esmc:3").random_spec == "tiny-esmc:3"
    assert ModelId.parse("random:").random_spec == "" and ModelId.parse("esm2_t6_8M_UR50D").random_spec == ""
    assert ModelId.parse("esm1v_ensemble").members == ENSEMBLES["esm1v_ensemble"].members
    assert ModelId.parse("ensemble: a , b,").members == ("a", "b")
    assert ModelId.parse("random:tiny").members == () and ModelId.parse("/m/a").members == ()
    with pytest.raises(ValueError, match="two models or more"):
        ModelId.parse("ensemble:a").members


def test_short_names_are_the_ensemble_columns():
    members = ["/m/esm1v_1.pt", "/m/ckpt/", "facebook/esm2_t6_8M_UR50D", "random:tiny", "ensemble:a,b", "x.pth"]
    assert [ModelId.parse(m).short_name for m in members] == [
        "esm1v_1", "ckpt", "esm2_t6_8M_UR50D", "random:tiny", "ensemble", "x"]
    assert member_columns(["/a/m.pt", "/b/m.pt"]) == ["score_1_m", "score_2_m"]


@pytest.mark.parametrize("text, kind, family, preset", [
    ("esmfold_v1", "fold", "esmfold", "esmfold_v1"),
    ("facebook/esmfold_v1", "fold", "esmfold", "esmfold_v1"),
    ("ESMFold2", "fold", "esmfold2", "esmfold2"),  # the Hub's names ignore case: one rule for every fold preset
    ("biohub/ESMFold2-Fast", "fold", "esmfold2", "esmfold2-fast"),
    ("random:esmfold-tiny", "random", "esmfold", None),  # an untrained fold model, not a language model
    ("random:esmfold-tiny:3", "random", "esmfold", None),
    ("random:esmfold2-tiny:4", "random", "esmfold2", None),
    ("random:esmfold-tinyX", "random", None, None),  # not the fold test model (the app once took it for one)
    ("esm2_t6_8M_UR50D", "preset", None, None),
])
def test_fold_models_are_model_ids(text, kind, family, preset):
    model_id = ModelId.parse(text)
    assert (model_id.kind, model_id.fold, model_id.fold_preset) == (kind, family, preset)
    assert model_id.fold_family() == family


def test_fold_seed_and_folders(tmp_path):
    assert ModelId.parse("random:esmfold-tiny").fold_seed == 0
    assert ModelId.parse("random:esmfold2-tiny:7").fold_seed == 7
    with pytest.raises(ValueError, match="whole number"):
        ModelId.parse("random:esmfold-tiny:x").fold_seed
    (tmp_path / "config.json").write_text('{"model_type": "esmfold2"}')
    assert ModelId.parse(str(tmp_path)).fold_family() == "esmfold2"
    (tmp_path / "config.json").write_text('{"model_type": "esm"}')
    assert ModelId.parse(str(tmp_path)).fold_family() == "esmfold"  # the ESMFold (v1) loader says what is wrong
