"""Shared fixtures: isolated caches, checkpoints written in the published formats, real FASTA."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from flamino_core.model.config import ESM2Config

# Property tests are deterministic: each runs the same examples on every run (a fixed seed derived
# from the test), so a failure is reproducible and CI never turns red on a lucky draw. A new input
# class a property test should cover is added as an example test (see test_robustness).
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("flamino", derandomize=True, database=None)
    _hypothesis_settings.load_profile("flamino")
except ImportError:  # hypothesis is a test extra
    pass

# Time by kind and isolation; the run's Streamlit server and Chromium; the run's Ray head.
pytest_plugins = ["suite_timing", "browser_fixtures", "ray_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
# The shared data beside the checkout; $FLAMINO_SHARED names another copy (an accelerator host,
# where only the checkout travels: benchmarks/accelerator_run.sh).
SHARED = Path(os.environ.get("FLAMINO_SHARED") or Path(__file__).resolve().parents[2] / "shared")
SHARED_FASTA = SHARED / "fasta"
T6 = ESM2Config.preset("esm2_t6_8M_UR50D")
TINY = ESM2Config.tiny()


# --- markers: every test has one kind, so `pytest -m unit` is the fast inner loop ------------------
# unit: no model run, no subprocess, no Streamlit or browser (seconds in all); integration: the
# model on random weights, whole commands, subprocesses, file corpora; parity: numbers against HF
# transformers / fair-esm / torch; app: Streamlit's AppTest; browser: Chromium; ray: starts Ray.
# `slow` (parity at full preset shapes) is kept as it was, on top of a kind. A file's tests take
# its folder's kind unless the test is marked itself or named in TEST_KINDS.
pytest.register_assert_rewrite("suite_timing")  # imported here before pytest loads it as a plugin
from suite_timing import KINDS  # noqa: E402  (one list for the markers and the timing report)
# A test file's kind is its folder (tests/unit, tests/integration, tests/parity, tests/app,
# tests/browser, tests/ray); the shared helpers stay beside this file. Every folder on the path:
import kind_folders  # noqa: E402,F401
TEST_KINDS = {  # "file::test name prefix" -> kind, where a test is not its file's kind
    "test_structure_numbering.py::test_the_command_line_": "integration",
    "test_structure_numbering.py::test_flamino_score_": "integration",
    "test_structure_numbering.py::test_the_variants_page_": "app",
    "test_app_first_run.py::test_": "app",  # the whole file (AppTest)
    "test_browser_first_run.py::test_": "browser",  # the whole file (Chromium)
    "test_uniprot_fetch.py::test_the_input_page_": "app",  # (the rest: unit, a local server)
    "test_uniprot_fetch.py::test_": "unit",
    "test_alphabet.py::test_matches_": "parity",  # against the installed fair-esm
    "test_analysis.py::test_apc_runs_traced_by_jax": "integration",
    "test_record_sets.py::test_umap_is_deterministic": "integration",  # minutes of UMAP on 2 cores
    "test_contact_eval.py::test_random_tiny_model": "integration",
    "test_result_store.py::test_a_kill_during_a_write": "integration",  # subprocesses
    "test_result_store.py::test_two_processes": "integration",
    "test_dms.py::test_real_assay_reads": "unit", "test_dms.py::test_metrics_on_the_real_assay": "unit",
    "test_dms.py::test_wild_type_derived": "unit", "test_dms.py::test_unusable_tables": "unit",
    "test_dms.py::test_a_missing_file": "unit", "test_dms.py::test_undefined_statistics": "unit",
    "test_dms.py::test_any_table_is_read": "unit",
    "test_dms_numbering.py::test_the_right_numbering": "unit",
    "test_dms_numbering.py::test_the_app_says": "app",
    "test_hosted_attacks.py::test_a_gzipped_fasta_bomb_is_refused_on_the_input_page": "app",
    "test_hosted_attacks.py::test_a_structure_over_the_atom_or_model_limit_is_refused_on_the_page": "app",
    "test_hosted_attacks_tables.py::test_one_upload_parsed_once": "app",  # the Structure page's cache
    "test_hosted_attacks_tables.py::test_the_wide_row_is_refused_on_the": "app",
    "test_hosted_attacks_tables.py::test_commas_are_refused_on_the": "app",
    "test_hosted_attacks_tables.py::test_the_metadata_check": "app",
    "test_hosted_attacks_tables.py::test_the_chain_cap_holds_on_the": "app",
    "test_hosted_attacks_tables.py::test_a_wide_mutation_table_is_refused_on_the": "app",
    "test_hosted_attacks_tables.py::test_the_command_line_refuses": "integration",  # the CLI in process
    "test_hosted_attacks_fits.py::test_the_page": "app",  # issue #53's rows on the Variant effects page
    "test_robustness.py::test_validator_": "unit",
    "test_robustness.py::test_app_": "app", "test_robustness.py::test_headers_are_shown": "app",
    "test_robustness.py::test_dropped_connection_in_the_app": "app",
    "test_batch.py::test_killed_worker": "ray", "test_batch.py::test_score_job_in_process": "ray",
    "test_batch.py::test_batch_command_line": "ray",
    "test_cli.py::test_invalid_inputs": "integration", "test_cli.py::test_mixed_file": "integration",
    "test_cli.py::test_console_script": "integration", "test_cli.py::test_embed_reads_three_letter": "integration",
    "test_cli.py::test_embed_contacts_of_a_long": "integration",
    "test_cli.py::test_command_ends_without_teardown": "integration",  # subprocesses
    "test_cli_variants.py::test_variants_scores_match_hf": "parity",
    "test_cli_variants.py::test_variants_joint_masked_adds_non_additivity_against_hf": "parity",
    "test_variant_scores.py::test_k_variants": "integration", "test_variant_scores.py::test_skipped_entries": "integration",
    "test_variant_scores.py::test_nothing_to_score": "integration", "test_variant_scores.py::test_pll_size_limit": "unit",
    "test_registration.py::test_the_app_": "app",
    "test_structure_figures.py::test_3d_view_renders_offline": "browser",
    "test_notation_pasted.py::test_flamino_variants_reads": "integration",
    "test_indel_scores.py::test_pll_announces": "integration",
    "test_indel_scores.py::test_substitution_strategies_refuse": "integration",
    "test_dms_indels.py::test_the_indel_layout_needs": "unit",
    "test_indel_windows.py::test_the_window_holds": "unit",
    "test_indel_windows.py::test_windows_are_the_unmasked": "unit",
}


def compiled_code_root() -> Path:
    """Where the runs of this machine keep compiled code: ``$FLAMINO_TEST_COMPILE_CACHE``, else
    ``~/.cache/flamino-tests`` (``$XDG_CACHE_HOME`` honoured). Outside the checkout, so that a fresh
    clone on a machine that ran the suite before does not compile everything again: in a fresh
    clone an empty cache made test_engine.py 138-151 s against 32-37 s, and the whole suite ~28
    minutes (docs/testing.md). Never a result: see ``compile_cache_folder``."""
    configured = os.environ.get("FLAMINO_TEST_COMPILE_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flamino-tests"


def compile_cache_folder() -> Path:
    """``<compiled_code_root>/jax-cache/<key>``: JAX's persistent compilation cache for every process of
    a run (this one, xdist workers, Streamlit servers, CLI subprocesses, Ray actors) and kept for
    the next run. Compiled code is not a result: sharing it changes no number a test checks (each
    test still has its own result store). Keyed by what makes an entry stale: the JAX and jaxlib
    versions and the fused attention kernel's source (its custom call is looked up by name)."""
    from importlib.metadata import version

    digest = hashlib.sha256()
    for source in sorted((ROOT / "csrc").glob("*")) + [ROOT / "setup.py"]:
        if source.is_file():
            digest.update(source.name.encode() + source.read_bytes())
    key = f"jax{version('jax')}-jaxlib{version('jaxlib')}-kernel{digest.hexdigest()[:12]}"
    return compiled_code_root() / "jax-cache" / key


def pytest_configure(config):
    """The run's environment, set once before anything starts (workers, servers, Ray heads and
    subprocesses inherit it): one compile cache, and default caches in a temporary folder of the
    run, so a fixture that starts a process before ``isolated_cache`` runs (a module's Ray head)
    still never writes to ``~/.cache``."""
    if os.environ.get("FLAMINO_TEST_RUN_ROOT"):  # an xdist worker: the controller set it all
        return
    run_root = Path(tempfile.mkdtemp(prefix="flamino-tests-"))
    config._flamino_run_root = run_root
    cache = compile_cache_folder()
    cache.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "FLAMINO_TEST_RUN_ROOT": str(run_root),
        "FLAMINO_CACHE": str(run_root / "flamino"),
        "HF_HOME": str(run_root / "hf"),
        "HF_HUB_OFFLINE": "1",
        # A local Ray of a test (the batch command, test_ray_twice) turns token authentication on
        # and, without a token, writes one to ~/.ray/auth_token: the run gives it one instead.
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "FLAMINO_JAX_CACHE": str(cache),  # read by engine.enable_compilation_cache (CLI, app, Ray)
        "FLAMINO_FOLD_EXPRESS_WARM": "0",  # no page's fold offer starts a worker of its own (test_fold_express)
        "JAX_COMPILATION_CACHE_DIR": str(cache),  # JAX's own default, for in-process engines
        # The tiny test models compile in tenths of a second, each shape in many processes:
        # keep those too (JAX's default keeps only compilations over 1 s; flamino's over 0.2 s).
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.05",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    })


def pytest_unconfigure(config):
    run_root = getattr(config, "_flamino_run_root", None)
    if run_root is not None:
        shutil.rmtree(run_root, ignore_errors=True)


def pytest_ignore_collect(collection_path, config):
    """Under ``-m unit``, a file with no unit test is not even imported: JAX, torch and Streamlit
    cost more to import than the unit tests take to run."""
    name, folder = collection_path.name, collection_path.parent.name
    if config.getoption("markexpr", "") != "unit" or not name.startswith("test_") or folder not in KINDS:
        return None
    unit = folder == "unit" or any(k.startswith(f"{name}::") and v == "unit" for k, v in TEST_KINDS.items())
    return None if unit else True


def kind_of(folder: str, file_name: str, test_name: str) -> str:
    """A test's kind: TEST_KINDS's where it names the test, else its folder's (a test marked with
    a kind in its file keeps it)."""
    key = f"{file_name}::{test_name}"
    return next((k for prefix, k in TEST_KINDS.items() if key.startswith(prefix)),
                folder if folder in KINDS else "integration")


def pytest_collection_modifyitems(config, items):
    """Give every test its kind (``KINDS``), and order the xdist groups."""
    groups = {}
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in KINDS):
            item.add_marker(getattr(pytest.mark, kind_of(item.path.parent.name, item.path.name, item.name)))
        marked = _group_of_kind(next(k for k in KINDS if item.get_closest_marker(k)), item.path.name)
        groups[item.nodeid] = group_of(item.nodeid)
        if marked != groups[item.nodeid]:
            raise pytest.UsageError(f"{item.nodeid} is marked {marked!r} but the tables of tests/conftest.py "
                                    f"put it in the xdist group {groups[item.nodeid]!r}: move its file to its kind's "
                                    "folder or name it in TEST_KINDS")
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    # Stable: within a group, and for groups not named, the collection order is kept.
    items.sort(key=lambda item: rank.get(groups[item.nodeid], len(rank)))


# --- scheduling under pytest-xdist (`make test`: `pytest -n auto --dist loadscope --no-loadscope-reorder`) ---
# Each file is one group, so a module's fixtures (a compiled engine, a reference model) are built
# once, on one worker. The browser tests are one group (one Streamlit server and one Chromium,
# browser_fixtures.py) and so are the Ray tests (two Ray clusters at once on two cores would
# starve both, and the two-node test pins cores). Groups are handed out in the order below, the
# longest first, so that no long group starts last. From a quiet run (docs/testing.md): ray 8.8 min (mostly waiting on Ray), browser 7.2, then
# parity 2.4, fused attention 1.9, batch 1.8, engine 1.5, predict 1.2, app sets and app 0.9 each.
LONGEST_FIRST = ("ray", "browser", "test_parity.py", "test_fused_attention.py", "test_batch.py", "test_engine.py",
                 "test_predict.py", "test_app_sets.py", "test_app.py")


def _group_of_kind(kind: str, file_name: str) -> str:
    return kind if kind in ("browser", "ray") else file_name


def group_of(nodeid: str) -> str:
    """A test's xdist group, from its node id alone (the scheduler runs where no test is collected)."""
    path, _, test_name = nodeid.partition("::")
    folder, file_name = (["", *path.split("/")])[-2:]
    return _group_of_kind(kind_of(folder, file_name, test_name), file_name)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with our groups as its scopes. (xdist's own ``loadgroup`` marks
    tests by rewriting a private node id attribute that pytest 9.2 no longer reads: every test
    went to any worker, and both workers started a browser server.)"""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(autouse=True)
def no_jobs_of_other_tests():
    """The app's background jobs are process-wide and every AppTest session has the same id: each
    test starts and ends with none (their results stay in that test's own store). Declared before
    ``isolated_cache``: its teardown runs after every monkeypatch is undone."""
    yield
    background = sys.modules.get("app_pages._ui.server.background")
    if background is not None and background.every_job():
        background.forget_all()


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own flamino and HF caches (result store, converted weights, pass
    rates), offline: nothing touches ~/.cache (checked at the end of the run: suite_timing.py).
    Compiled code is the one thing shared: ``FLAMINO_JAX_CACHE``, set for the run."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("FLAMINO_CACHE", str(root / "flamino"))
    monkeypatch.setenv("HF_HOME", str(root / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("FLAMINO_MODEL", raising=False)
    # A fixed load share (jobs/rates.load_share): a 5-second tick of the load average between a
    # rate's recording and its reading would move the tests' exact figures.
    monkeypatch.setenv("FLAMINO_LOAD_SHARE", "1")
    return root


@pytest.fixture(scope="session")
def shared_fasta() -> Path:
    if not SHARED_FASTA.is_dir():
        pytest.skip(f"shared FASTA files not found at {SHARED_FASTA}")
    return SHARED_FASTA


@pytest.fixture(scope="session")
def peer_tests() -> Path:
    """Biopython's ``Tests/`` folder (its PyPI source distribution, see tests/peer_corpus.py)."""
    from peer_corpus import CorpusUnavailable, peer_tests_dir

    try:
        return peer_tests_dir()
    except CorpusUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def real_sequences(shared_fasta) -> dict[str, str]:
    from flamino_core.inputs.fasta import read_fasta

    seqs = {}
    for path in sorted(shared_fasta.glob("*.fa")):
        for record in read_fasta(path).records:
            seqs[record.id] = record.sequence
    return seqs


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory):
    """{(config name, style): (directory, torch reference model)} for both HF key styles."""
    from reference_checkpoints import make_hf_model, write_hf_2022, write_hf_5x

    made = {}

    def get(config: ESM2Config, style: str):
        key = (config.name, style)
        if key not in made:
            model = make_hf_model(config, seed=checkpoint_seed(config.name, style))
            directory = tmp_path_factory.mktemp(f"hf-{config.name}-{style}")
            if style == "2022":
                write_hf_2022(model, config, directory)
            elif style == "2022-bin":
                write_hf_2022(model, config, directory, fmt="bin")
            else:
                write_hf_5x(model, directory)
            made[key] = (directory, _eager(model))
        return made[key]

    return get


def checkpoint_seed(*parts: str) -> int:
    """A weight seed fixed by the checkpoint's name, the same in every process and run.

    (``hash(str)`` is salted per process: it made every run test different weights.)
    """
    return zlib.crc32("/".join(parts).encode()) % 1000


def _eager(model):
    # HF's default SDPA attention returns no attention maps; compare against eager.
    model.config._attn_implementation = "eager"
    for module in model.modules():
        if hasattr(module, "config"):
            module.config._attn_implementation = "eager"
    return model.eval()




def pytest_terminal_summary(terminalreporter):
    """How many times the engine's jitted passes were traced (= compiled) in this run."""
    import sys

    engine = sys.modules.get("flamino_core.engine.engine")
    if engine is not None and engine.TRACE_COUNTS:
        counts = ", ".join(f"{name} {n}" for name, n in sorted(engine.TRACE_COUNTS.items()))
        terminalreporter.write_line(f"flamino compilations in this run: {counts}")
